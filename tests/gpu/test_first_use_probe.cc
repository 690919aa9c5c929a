// The probe at a machine's first use, end to end through the perf tool (its
// ranks are threads of its process): a first run with a GPU measures the
// machine and caches it, the next reads the cache, two processes that meet at
// the host's lock measure it once between them, and a short LANES_TIMEOUT,
// LANES_TOPO_PROBE=0 or no cache leave the assumed figures and write nothing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/gpu/gpu_harness.h"
#include "tests/multi/harness.h"
#include "topology/model.h"
#include "topology/probe_first_use.h"

namespace lanes::test {
namespace {

constexpr const char* kMeasured = "first use of this machine: measured and cached";
constexpr const char* kMeasuring = "first use of this machine: measuring";

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Processes other than this one with `path` open (their /proc/PID/fd links).
// Processes come and go meanwhile: every error just skips an entry.
int processesWithOpen(const std::string& path) {
  namespace fs = std::filesystem;
  int n = 0;
  const std::string self = std::to_string(getpid());
  std::error_code ec;
  for (fs::directory_iterator proc("/proc", ec), end; !ec && proc != end; proc.increment(ec)) {
    const std::string pid = proc->path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos || pid == self) continue;
    std::error_code fdEc;
    for (fs::directory_iterator fd(proc->path() / "fd", fdEc); !fdEc && fd != end;
         fd.increment(fdEc)) {
      std::error_code linkEc;
      if (fs::read_symlink(fd->path(), linkEc).string() == path) {
        ++n;
        break;
      }
    }
  }
  return n;
}

class FirstUseProbeGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpusVisibleFromChild() <= 0) GTEST_SKIP() << kNoGpu;
    dir_ = std::filesystem::temp_directory_path() /
           ("lanes-first-use-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    cache_ = (dir_ / "topo_probes.json").string();
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // One 8-byte all-reduce of device buffers by `threads` thread ranks on GPU 0,
  // with PLAN and TOPO lines at INFO; `env` comes last and wins.
  CommandResult perf(int threads, std::vector<std::pair<std::string, std::string>> env) const {
    std::vector<std::pair<std::string, std::string>> all = {{"LANES_TOPO_CACHE", cache_},
                                                            {"LANES_TIMEOUT", "300"},
                                                            {"LANES_DEBUG", "INFO"},
                                                            {"LANES_DEBUG_SUBSYS", "PLAN,TOPO"},
                                                            {"CUDA_VISIBLE_DEVICES", "0"}};
    for (auto& e : env) all.push_back(std::move(e));
    return runCommand({LANES_ALL_REDUCE_PERF, "-t", std::to_string(threads), "--memory", "device",
                       "-b", "8", "-e", "8", "-n", "2", "-w", "1", "-c", "1"},
                      all, 240);
  }

  std::filesystem::path dir_;
  std::string cache_;
};

TEST_F(FirstUseProbeGpu, FirstRunMeasuresAndCachesTheNextReads) {
  const CommandResult first = perf(2, {});
  ASSERT_TRUE(first.exited && first.exitCode == 0) << first.describe();
  EXPECT_EQ(occurrences(first.output, kMeasured), 1u) << first.output;
  EXPECT_TRUE(std::filesystem::exists(cache_));
  // Both ranks plan from the measured figures (rank 0's, agreed at init).
  EXPECT_EQ(occurrences(first.output, "GPU cost model inputs (measured"), 2u) << first.output;
  // The probe's own communicators stay out of the log.
  EXPECT_EQ(occurrences(first.output, "cost model inputs (assumed"), 0u) << first.output;

  const CommandResult second = perf(2, {});
  ASSERT_TRUE(second.exited && second.exitCode == 0) << second.describe();
  EXPECT_EQ(occurrences(second.output, kMeasuring), 0u) << second.output;
  EXPECT_EQ(occurrences(second.output, "topology: probe results from " + cache_), 1u)
      << second.output;
  EXPECT_EQ(occurrences(second.output, "GPU cost model inputs (measured"), 2u) << second.output;

  // lanes-topo (beside the perf tool) shows them, and who measured them.
  const std::string topo =
      (std::filesystem::path(LANES_ALL_REDUCE_PERF).parent_path() / "lanes-topo").string();
  const CommandResult report = runCommand({topo}, {{"LANES_TOPO_CACHE", cache_}}, 60);
  ASSERT_TRUE(report.exited && report.exitCode == 0) << report.describe();
  EXPECT_EQ(occurrences(report.output,
                        "Probes (measured at first use: the first communicator's "
                        "GPU, no P2P pairs; lanes-topo --probe measures all; GPU "
                        "copies from pinned host memory, best of several 64 MiB "
                        "copies):"),
            1u)
      << report.output;
  EXPECT_EQ(occurrences(report.output, "stream flag"), 1u) << report.output;
}

// Both start while the test holds this host's lock, which it frees once both
// wait at it: one then measures and the other, having waited, reads its figures.
TEST_F(FirstUseProbeGpu, TwoProcessesAtOnceMeasureOnce) {
  topo::Topology here;
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  here.hostname = host;
  const std::string lockPath = topo::firstUseLockPath(cache_, here);
  const int fd = ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << lockPath;
  const std::string lockFile = std::filesystem::canonical(lockPath).string();  // as /proc links say
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  CommandResult runs[2];
  std::thread first([&] { runs[0] = perf(1, {}); });
  std::thread second([&] { runs[1] = perf(1, {}); });
  // Released once both wait at it: each has the lock file open while it polls.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (processesWithOpen(lockFile) < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const int waiting = processesWithOpen(lockFile);
  ::close(fd);  // releases the lock
  first.join();
  second.join();
  for (const CommandResult& r : runs) {
    ASSERT_TRUE(r.exited && r.exitCode == 0) << r.describe();
    EXPECT_EQ(occurrences(r.output, kMeasuring), 1u) << r.output;
    EXPECT_EQ(occurrences(r.output, "GPU cost model inputs (measured"), 1u) << r.output;
  }
  EXPECT_EQ(waiting, 2) << "processes waiting at " << lockPath;
  const std::string both = runs[0].output + "\n----\n" + runs[1].output;
  EXPECT_EQ(occurrences(both, kMeasured), 1u) << both;
  EXPECT_EQ(occurrences(both, "first use of this machine: another process measured it; read"), 1u)
      << both;
}

TEST_F(FirstUseProbeGpu, ShortTimeoutOffSwitchAndNoCacheMeasureNothing) {
  const std::vector<std::pair<std::vector<std::pair<std::string, std::string>>, std::string>>
      cases = {{{{"LANES_TIMEOUT", "30"}},
                "the communicator's timeout (LANES_TIMEOUT or lanesConfig_t.timeoutSeconds) is "
                "under 60 s"},
               {{{"LANES_TOPO_CACHE", "none"}}, "LANES_TOPO_CACHE is off"},
               {{{"LANES_TOPO_PROBE", "0"}}, ""}};
  for (const auto& [env, why] : cases) {
    const CommandResult r = perf(2, env);
    ASSERT_TRUE(r.exited && r.exitCode == 0) << r.describe();
    EXPECT_EQ(occurrences(r.output, kMeasuring), 0u) << r.output;
    if (!why.empty()) {
      EXPECT_GE(occurrences(r.output, why), 1u) << r.output;
    }
    EXPECT_EQ(occurrences(r.output, "GPU cost model inputs (assumed"), 2u) << r.output;
    // Neither a cache nor a lock file.
    EXPECT_TRUE(std::filesystem::is_empty(dir_)) << env.front().first;
  }
}

}  // namespace
}  // namespace lanes::test
