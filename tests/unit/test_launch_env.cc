// Launch-environment parsing for each launcher, secret derivation, and a
// rendezvous driven purely by derived ids.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>

#include "base/socket.h"
#include "bootstrap/bootstrap.h"

namespace lanes {
namespace {

using Vars = std::map<std::string, std::string>;

// Clears every variable the launch env reads, sets the given ones, and
// restores the previous environment afterwards.
class ScopedEnv {
 public:
  explicit ScopedEnv(const Vars& vars) {
    for (const char* name : kAll) {
      if (const char* v = std::getenv(name)) saved_[name] = v;
      unsetenv(name);
    }
    for (const auto& [k, v] : vars) setenv(k.c_str(), v.c_str(), 1);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() {
    for (const char* name : kAll) unsetenv(name);
    for (const auto& [k, v] : saved_) setenv(k.c_str(), v.c_str(), 1);
  }

 private:
  static constexpr const char* kAll[] = {"LANES_RANK",
                                         "LANES_WORLD_SIZE",
                                         "LANES_LOCAL_RANK",
                                         "LANES_ROOT_ADDR",
                                         "LANES_ROOT_PORT",
                                         "LANES_BOOTSTRAP_SECRET",
                                         "LANES_JOB_ID",
                                         "RANK",
                                         "WORLD_SIZE",
                                         "LOCAL_RANK",
                                         "MASTER_ADDR",
                                         "MASTER_PORT",
                                         "OMPI_COMM_WORLD_RANK",
                                         "OMPI_COMM_WORLD_SIZE",
                                         "OMPI_COMM_WORLD_LOCAL_RANK",
                                         "SLURM_PROCID",
                                         "SLURM_NTASKS",
                                         "SLURM_LOCALID",
                                         "SLURM_JOB_ID",
                                         "TORCHELASTIC_RUN_ID",
                                         "OMPI_MCA_orte_ess_jobid",
                                         "PMIX_NAMESPACE"};
  std::map<std::string, std::string> saved_;
};

TEST(LaunchEnv, NoLauncherIsAnError) {
  ScopedEnv env(Vars{});
  LaunchEnv le;
  Status st = readLaunchEnv(&le);
  EXPECT_EQ(st.code(), lanesInvalidArgument);
  EXPECT_NE(st.message().find("LANES_RANK"), std::string::npos);
}

TEST(LaunchEnv, LanesVariables) {
  ScopedEnv env(Vars{{"LANES_RANK", "2"},
                     {"LANES_WORLD_SIZE", "4"},
                     {"LANES_LOCAL_RANK", "0"},
                     {"LANES_ROOT_ADDR", "10.1.2.3:5000"},
                     {"RANK", "9"},  // lower priority, ignored
                     {"WORLD_SIZE", "16"}});
  LaunchEnv le;
  ASSERT_TRUE(readLaunchEnv(&le).isOk());
  EXPECT_EQ(le.source, "lanes");
  EXPECT_EQ(le.rank, 2);
  EXPECT_EQ(le.worldSize, 4);
  EXPECT_EQ(le.localRank, 0);
  EXPECT_EQ(le.rootAddr, "10.1.2.3:5000");
}

TEST(LaunchEnv, TorchrunUsesThePortAfterMasterPort) {
  ScopedEnv env(Vars{{"RANK", "3"},
                     {"WORLD_SIZE", "8"},
                     {"LOCAL_RANK", "3"},
                     {"MASTER_ADDR", "node7"},
                     {"MASTER_PORT", "29500"}});
  LaunchEnv le;
  ASSERT_TRUE(readLaunchEnv(&le).isOk());
  EXPECT_EQ(le.source, "torchrun");
  EXPECT_EQ(le.rank, 3);
  EXPECT_EQ(le.worldSize, 8);
  EXPECT_EQ(le.localRank, 3);
  EXPECT_EQ(le.rootAddr, "node7:29501");
}

TEST(LaunchEnv, RootPortAndRootAddrOverrides) {
  {
    ScopedEnv env(Vars{{"RANK", "0"},
                       {"WORLD_SIZE", "2"},
                       {"MASTER_ADDR", "fd00::1"},
                       {"MASTER_PORT", "29500"},
                       {"LANES_ROOT_PORT", "4000"}});
    LaunchEnv le;
    ASSERT_TRUE(readLaunchEnv(&le).isOk());
    EXPECT_EQ(le.rootAddr, "[fd00::1]:4000");
  }
  {
    ScopedEnv env(Vars{{"RANK", "0"},
                       {"WORLD_SIZE", "2"},
                       {"MASTER_ADDR", "a"},
                       {"MASTER_PORT", "1"},
                       {"LANES_ROOT_ADDR", "[::1]:7000"}});
    LaunchEnv le;
    ASSERT_TRUE(readLaunchEnv(&le).isOk());
    EXPECT_EQ(le.rootAddr, "[::1]:7000");
  }
}

TEST(LaunchEnv, OpenMpiNeedsARootAddress) {
  {
    ScopedEnv env(Vars{{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
    LaunchEnv le;
    Status st = readLaunchEnv(&le);
    EXPECT_EQ(st.code(), lanesInvalidArgument);
    EXPECT_NE(st.message().find("LANES_ROOT_ADDR"), std::string::npos) << st.message();
  }
  ScopedEnv env(Vars{{"OMPI_COMM_WORLD_RANK", "1"},
                     {"OMPI_COMM_WORLD_SIZE", "2"},
                     {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                     {"LANES_ROOT_ADDR", "host0:1234"}});
  LaunchEnv le;
  ASSERT_TRUE(readLaunchEnv(&le).isOk());
  EXPECT_EQ(le.source, "openmpi");
  EXPECT_EQ(le.rank, 1);
  EXPECT_EQ(le.worldSize, 2);
  EXPECT_EQ(le.localRank, 1);
  EXPECT_EQ(le.rootAddr, "host0:1234");
}

TEST(LaunchEnv, Slurm) {
  {
    ScopedEnv env(Vars{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}});
    LaunchEnv le;
    Status st = readLaunchEnv(&le);
    EXPECT_EQ(st.code(), lanesInvalidArgument);
    EXPECT_NE(st.message().find("LANES_ROOT_ADDR"), std::string::npos);
  }
  ScopedEnv env(Vars{{"SLURM_PROCID", "5"},
                     {"SLURM_NTASKS", "6"},
                     {"SLURM_LOCALID", "1"},
                     {"MASTER_ADDR", "10.0.0.9"},
                     {"MASTER_PORT", "6000"}});
  LaunchEnv le;
  ASSERT_TRUE(readLaunchEnv(&le).isOk());
  EXPECT_EQ(le.source, "slurm");
  EXPECT_EQ(le.rank, 5);
  EXPECT_EQ(le.worldSize, 6);
  EXPECT_EQ(le.localRank, 1);
  EXPECT_EQ(le.rootAddr, "10.0.0.9:6001");
}

// Each malformed value is reported naming its variable.
TEST(LaunchEnv, MalformedValuesNameTheVariable) {
  const std::vector<std::pair<std::map<std::string, std::string>, std::string>> cases = {
      {{{"RANK", "abc"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}},
       "RANK=abc"},
      {{{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}}, "RANK=2"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "WORLD_SIZE=0"},
      {{{"RANK", "0"}}, "WORLD_SIZE is not set"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "x"}},
       "MASTER_PORT=x"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}}, "MASTER_PORT is not set"},
      {{{"LANES_RANK", "0"}, {"LANES_WORLD_SIZE", "2"}, {"LANES_ROOT_ADDR", "hostonly"}},
       "LANES_ROOT_ADDR=hostonly"},
      {{{"LANES_RANK", "0"}, {"LANES_WORLD_SIZE", "2"}, {"LANES_ROOT_ADDR", "h:0"}},
       "LANES_ROOT_ADDR=h:0"},
      {{{"LANES_RANK", "0"},
        {"LANES_WORLD_SIZE", "2"},
        {"LANES_LOCAL_RANK", "-1"},
        {"LANES_ROOT_ADDR", "h:1"}},
       "LANES_LOCAL_RANK=-1"},
      {{{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "x"}}, "SLURM_NTASKS=x"},
  };
  for (const auto& [vars, expected] : cases) {
    ScopedEnv env(vars);
    LaunchEnv le;
    Status st = readLaunchEnv(&le);
    EXPECT_EQ(st.code(), lanesInvalidArgument) << expected;
    EXPECT_NE(st.message().find(expected), std::string::npos) << st.message();
  }
}

TEST(LaunchEnv, SecretFromVariableOrDerivedFromJob) {
  LaunchEnv le;
  le.rank = 0;
  le.worldSize = 2;
  le.rootAddr = "h:1";
  uint8_t a[32], b[32];
  uint64_t ca, cb;
  {
    ScopedEnv env(Vars{{"LANES_BOOTSTRAP_SECRET", std::string(62, 'a') + "0F"}});
    ASSERT_TRUE(launchSecretAndCommId(le, a, &ca).isOk());
    EXPECT_EQ(a[0], 0xaa);
    EXPECT_EQ(a[31], 0x0f);
  }
  {
    ScopedEnv env(Vars{{"LANES_BOOTSTRAP_SECRET", "xyz"}});
    Status st = launchSecretAndCommId(le, a, &ca);
    EXPECT_EQ(st.code(), lanesInvalidArgument);
    EXPECT_NE(st.message().find("LANES_BOOTSTRAP_SECRET"), std::string::npos);
  }
  {
    ScopedEnv env(Vars{{"LANES_BOOTSTRAP_SECRET", std::string(63, 'g') + "0"}});
    EXPECT_EQ(launchSecretAndCommId(le, a, &ca).code(), lanesInvalidArgument);
  }
  {
    ScopedEnv env(Vars{{"SLURM_JOB_ID", "100"}});
    ASSERT_TRUE(launchSecretAndCommId(le, a, &ca).isOk());
    ASSERT_TRUE(launchSecretAndCommId(le, b, &cb).isOk());
    EXPECT_EQ(std::memcmp(a, b, 32), 0);  // every rank derives the same
    EXPECT_EQ(ca, cb);
  }
  {
    ScopedEnv env(Vars{{"SLURM_JOB_ID", "101"}});
    ASSERT_TRUE(launchSecretAndCommId(le, b, &cb).isOk());
    EXPECT_NE(std::memcmp(a, b, 32), 0);  // another job, another secret
    EXPECT_NE(ca, cb);
  }
}

TEST(LaunchEnv, DerivedIdsRendezvous) {
  // A free port on loopback for the root.
  SocketAddress probe;
  ASSERT_TRUE(SocketAddress::parse("127.0.0.1:0", &probe).isOk());
  {
    Socket s;
    ASSERT_TRUE(Socket::listen(&probe, 1, &s).isOk());
  }
  const int n = 3;
  ScopedEnv env(Vars{{"TORCHELASTIC_RUN_ID", "job-42"}});
  std::vector<lanesUniqueId> ids(n);
  for (int r = 0; r < n; ++r) {  // rank 0 first: it starts the root
    LaunchEnv le;
    le.rank = r;
    le.worldSize = n;
    le.rootAddr = probe.toString();
    Status st = uniqueIdFromLaunchEnv(le, &ids[r]);
    ASSERT_TRUE(st.isOk()) << st.message();
  }
  for (int r = 1; r < n; ++r)
    EXPECT_EQ(std::memcmp(&ids[0], &ids[r], sizeof(lanesUniqueId)), 0) << "rank " << r;
  std::vector<int> sums(n, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      UniqueIdData id;
      ASSERT_TRUE(decodeUniqueId(ids[r], &id).isOk());
      RankInfo info;
      info.rank = r;
      std::unique_ptr<Bootstrap> b;
      Status st = Bootstrap::create(id, n, info, Deadline::after(60), &b);
      ASSERT_TRUE(st.isOk()) << st.message();
      std::vector<int> v(n);
      v[r] = r + 10;
      ASSERT_TRUE(b->allGather(v.data(), sizeof(int), Deadline::after(60)).isOk());
      for (int x : v) sums[r] += x;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(sums, std::vector<int>(n, 33));
}

}  // namespace
}  // namespace lanes
