// NCCL_* twins of LANES_* variables (core/nccl_env.h), as libnccl.so.2 turns
// them on: off by default, LANES_* wins, each translation, the listing of
// honoured and ignored NCCL_* names, and the "NCCL INFO" log tags.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <list>
#include <memory>
#include <sstream>
#include <vector>

#include "base/env.h"
#include "base/log.h"
#include "base/nccl_env.h"
#include "tests/common/log_file.h"
#include "tests/common/scoped_env.h"

extern char** environ;

namespace lanes {
namespace {

using test::ScopedEnv;

constexpr const char* kLanesTwins[] = {
    "LANES_DEBUG",         "LANES_DEBUG_SUBSYS",    "LANES_DEBUG_FILE",
    "LANES_SOCKET_IFNAME", "LANES_SOCKET_NTHREADS", "LANES_NSOCKS_PERTHREAD",
    "LANES_P2P_DISABLE",   "LANES_SHM_DISABLE",     "LANES_ALGO",
    "LANES_PROTO"};

// Every case starts from an environment without NCCL_* or twinned LANES_*
// variables (whatever the runner set) and with the twins off, and ends so.
class NcclEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::string> ncclNames;
    for (char** e = environ; *e != nullptr; ++e)
      if (std::strncmp(*e, "NCCL_", 5) == 0)
        ncclNames.push_back(std::string(*e, std::strchr(*e, '=') - *e));
    for (const std::string& n : ncclNames) unset(n.c_str());
    for (const char* n : kLanesTwins) unset(n);
    setNcclEnvironmentForTest(false);
  }
  void TearDown() override {
    setNcclEnvironmentForTest(false);
    scoped_.clear();  // restores the runner's variables before the log re-reads them
    logReloadConfig();
  }
  void set(const char* name, const char* value) {
    names_.push_back(name);
    scoped_.push_back(std::make_unique<ScopedEnv>(names_.back().c_str(), value));
  }
  void unset(const char* name) {
    names_.push_back(name);
    scoped_.push_back(std::make_unique<ScopedEnv>(names_.back().c_str(), std::nullopt));
  }
  // LANES_x as Lanes reads it with only NCCL_x set to `ncclValue`.
  std::optional<std::string> twin(const char* lanesName, const char* ncclName,
                                  const char* ncclValue) {
    ScopedEnv v(ncclName, ncclValue);
    return envString(lanesName);
  }

 private:
  std::list<std::string> names_;  // ScopedEnv keeps the name's pointer
  std::vector<std::unique_ptr<ScopedEnv>> scoped_;
};

using LogCapture = test::LogFile;
using test::occurrences;

TEST_F(NcclEnv, TwinsAreOffByDefault) {
  set("NCCL_SHM_DISABLE", "1");
  set("NCCL_SOCKET_IFNAME", "eth0");
  EXPECT_FALSE(ncclEnvironmentEnabled());
  EXPECT_FALSE(envString("LANES_SHM_DISABLE"));
  EXPECT_FALSE(envBool("LANES_SHM_DISABLE", false));
  EXPECT_FALSE(envString("LANES_SOCKET_IFNAME"));
  EXPECT_FALSE(ncclTwinValue("LANES_SHM_DISABLE"));
}

TEST_F(NcclEnv, TwinsFillUnsetLanesVariablesOnceEnabled) {
  set("NCCL_SHM_DISABLE", "1");
  set("NCCL_SOCKET_IFNAME", "^docker,lo");
  set("NCCL_SOCKET_NTHREADS", "4");
  set("NCCL_NSOCKS_PERTHREAD", "3");
  set("NCCL_DEBUG_FILE", "/tmp/nccl.%h.%p");
  enableNcclEnvironment();
  EXPECT_TRUE(ncclEnvironmentEnabled());
  EXPECT_TRUE(envBool("LANES_SHM_DISABLE", false));
  EXPECT_EQ(envString("LANES_SOCKET_IFNAME"), "^docker,lo");
  EXPECT_EQ(envInt("LANES_SOCKET_NTHREADS", 2), 4);
  EXPECT_EQ(envInt("LANES_NSOCKS_PERTHREAD", 1), 3);
  EXPECT_EQ(envString("LANES_DEBUG_FILE"), "/tmp/nccl.%h.%p");
  // Variables without a twin stay unset.
  EXPECT_FALSE(envString("LANES_SHM_RING_BYTES"));
  setNcclEnvironmentForTest(false);
  EXPECT_FALSE(envString("LANES_SOCKET_IFNAME"));
}

TEST_F(NcclEnv, LanesVariableWinsOverItsTwin) {
  set("NCCL_P2P_DISABLE", "1");
  set("LANES_P2P_DISABLE", "0");
  set("NCCL_SOCKET_IFNAME", "eth0");
  set("LANES_SOCKET_IFNAME", "=ib0");
  enableNcclEnvironment();
  EXPECT_EQ(envString("LANES_P2P_DISABLE"), "0");
  EXPECT_EQ(envString("LANES_SOCKET_IFNAME"), "=ib0");
  auto lines = ncclEnvironmentReport();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("NCCL_P2P_DISABLE=1 shadowed by LANES_P2P_DISABLE=0"), std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("NCCL_SOCKET_IFNAME=eth0 shadowed by LANES_SOCKET_IFNAME==ib0"),
            std::string::npos)
      << lines[0];
}

TEST_F(NcclEnv, DebugLevelsTranslate) {
  enableNcclEnvironment();
  EXPECT_EQ(twin("LANES_DEBUG", "NCCL_DEBUG", "VERSION"), "WARN");
  EXPECT_EQ(twin("LANES_DEBUG", "NCCL_DEBUG", "abort"), "WARN");
  EXPECT_EQ(twin("LANES_DEBUG", "NCCL_DEBUG", "WARN"), "WARN");
  EXPECT_EQ(twin("LANES_DEBUG", "NCCL_DEBUG", "Info"), "INFO");
  EXPECT_EQ(twin("LANES_DEBUG", "NCCL_DEBUG", "trace"), "TRACE");
  EXPECT_FALSE(twin("LANES_DEBUG", "NCCL_DEBUG", "LOUD"));
}

TEST_F(NcclEnv, DebugSubsysMapsOntoLanesSubsystems) {
  enableNcclEnvironment();
  EXPECT_EQ(twin("LANES_DEBUG_SUBSYS", "NCCL_DEBUG_SUBSYS", "^NET"), "^TRANSPORT");
  EXPECT_EQ(twin("LANES_DEBUG_SUBSYS", "NCCL_DEBUG_SUBSYS", "INIT,P2P,SHM,graph,TUNING,ALLOC,ENV"),
            "INIT,TRANSPORT,TOPO,PLAN,ENV");
  EXPECT_EQ(twin("LANES_DEBUG_SUBSYS", "NCCL_DEBUG_SUBSYS", "COLL,PROXY,BOOTSTRAP"),
            "COLL,TRANSPORT,BOOTSTRAP");
  EXPECT_EQ(twin("LANES_DEBUG_SUBSYS", "NCCL_DEBUG_SUBSYS", "ALL"), "ALL");
  EXPECT_FALSE(twin("LANES_DEBUG_SUBSYS", "NCCL_DEBUG_SUBSYS", "ALLOC,CALL,NVLS,REG,PROFILE,RAS"));

  // And the log obeys them.
  set("NCCL_DEBUG", "INFO");
  set("NCCL_DEBUG_SUBSYS", "^NET");
  logReloadConfig();
  EXPECT_TRUE(logEnabled(LogLevel::Info, LogSubsys::Init));
  EXPECT_FALSE(logEnabled(LogLevel::Info, LogSubsys::Transport));
  EXPECT_FALSE(logEnabled(LogLevel::Trace, LogSubsys::Init));
}

TEST_F(NcclEnv, DisableFlagsTranslateOnlyOne) {
  enableNcclEnvironment();
  EXPECT_EQ(twin("LANES_P2P_DISABLE", "NCCL_P2P_DISABLE", "1"), "1");
  // NCCL's 0 is its default; Lanes' LANES_P2P_DISABLE=0 would force P2P.
  EXPECT_FALSE(twin("LANES_P2P_DISABLE", "NCCL_P2P_DISABLE", "0"));
  EXPECT_EQ(twin("LANES_SHM_DISABLE", "NCCL_SHM_DISABLE", "1"), "1");
  EXPECT_FALSE(twin("LANES_SHM_DISABLE", "NCCL_SHM_DISABLE", "0"));
  EXPECT_FALSE(twin("LANES_SHM_DISABLE", "NCCL_SHM_DISABLE", "yes please"));
}

TEST_F(NcclEnv, ProtoWithoutLlDisablesLl) {
  enableNcclEnvironment();
  for (const char* v : {"^LL", "Simple", "LL128,Simple", "simple", "^ll,LL128"})
    EXPECT_EQ(twin("LANES_PROTO", "NCCL_PROTO", v), "^ll") << v;
  for (const char* v : {"LL", "LL,Simple", "^LL128", "^Simple", "allreduce:simple", "Fast"})
    EXPECT_FALSE(twin("LANES_PROTO", "NCCL_PROTO", v)) << v;
}

TEST_F(NcclEnv, AlgoMapsOnlyRingAlone) {
  enableNcclEnvironment();
  for (const char* v : {"Ring", "ring", "^Tree,CollNetDirect,CollNetChain,NVLS,NVLSTree,PAT"})
    EXPECT_EQ(twin("LANES_ALGO", "NCCL_ALGO", v), "ring") << v;
  for (const char* v :
       {"Tree", "Tree,Ring", "^Tree", "allreduce:ring;broadcast:tree", "Ring,Bogus"})
    EXPECT_FALSE(twin("LANES_ALGO", "NCCL_ALGO", v)) << v;

  set("NCCL_ALGO", "Tree");
  auto lines = ncclEnvironmentReport();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "NCCL variables read: NCCL_ALGO=Tree ignored (Lanes chooses its algorithms; only Ring "
            "alone maps, to LANES_ALGO=ring)");
}

TEST_F(NcclEnv, ReportListsHonouredAndIgnoredVariables) {
  EXPECT_TRUE(ncclEnvironmentReport().empty());
  set("NCCL_SOCKET_IFNAME", "eth0");
  set("NCCL_DEBUG", "VERSION");
  set("NCCL_PROTO", "LL,Simple");
  set("NCCL_IB_DISABLE", "1");
  set("NCCL_COMM_ID", "10.0.0.1:4000");
  set("NCCL_NVLS_ENABLE", "0");
  set("NCCL_MIN_NCHANNELS", "4");
  set("NCCL_EMPTY", "");
  enableNcclEnvironment();
  auto lines = ncclEnvironmentReport();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            "NCCL variables read: NCCL_DEBUG=VERSION -> LANES_DEBUG=WARN; "
            "NCCL_SOCKET_IFNAME=eth0 -> LANES_SOCKET_IFNAME; "
            "NCCL_PROTO=LL,Simple ignored (allows LL: nothing to change); "
            "NCCL_IB_DISABLE=1 -> LANES_IB_DISABLE; "
            "NCCL_COMM_ID=10.0.0.1:4000 (the bootstrap root's address; rank 0 starts it)");
  EXPECT_EQ(lines[1],
            "NCCL variables that mean nothing to Lanes and are ignored: NCCL_MIN_NCHANNELS=4, "
            "NCCL_NVLS_ENABLE=0");
}

TEST_F(NcclEnv, LogLinesSayNcclOnceEnabled) {
  set("LANES_DEBUG", "INFO");
  LogCapture capture;
  logReloadConfig();
  LANES_INFO(Init, 2, "plain marker");
  enableNcclEnvironment();
  LANES_INFO(Init, 2, "info marker");
  LANES_WARN(Init, -1, "warn marker");
  std::string text = capture.text();
  std::string prefix = std::to_string(getpid());
  EXPECT_NE(text.find(":" + prefix + ":2 [lanes] INFO plain marker\n"), std::string::npos) << text;
  EXPECT_NE(text.find(":" + prefix + ":2 [lanes] NCCL INFO info marker\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find(":" + prefix + ":- [lanes] NCCL WARN warn marker\n"), std::string::npos)
      << text;
}

TEST_F(NcclEnv, NcclDebugAndDebugFileDriveTheLog) {
  set("NCCL_DEBUG", "TRACE");
  LogCapture capture("NCCL_DEBUG_FILE");
  logReloadConfig();
  LANES_WARN(Coll, 0, "unseen marker");  // twins off: to stderr, NCCL_DEBUG_FILE means nothing
  enableNcclEnvironment();               // re-read lazily, at the next log call
  LANES_TRACE(Coll, 0, "trace marker");
  std::string text = capture.text();
  EXPECT_EQ(text.find("unseen marker"), std::string::npos) << text;
  EXPECT_NE(text.find("[lanes] NCCL TRACE trace marker\n"), std::string::npos) << text;
}

TEST_F(NcclEnv, EnvironmentIsLoggedOnce) {
  set("LANES_DEBUG", "INFO");
  set("NCCL_SOCKET_IFNAME", "eth0");
  set("NCCL_MIN_NCHANNELS", "4");
  LogCapture capture;
  logNcclEnvironmentOnce(3);  // twins off: nothing, and the once is not used up
  enableNcclEnvironment();
  logNcclEnvironmentOnce(3);
  logNcclEnvironmentOnce(3);
  std::string text = capture.text();
  EXPECT_EQ(occurrences(text,
                        ":3 [lanes] NCCL INFO NCCL variables read: "
                        "NCCL_SOCKET_IFNAME=eth0 -> LANES_SOCKET_IFNAME\n"),
            1u)
      << text;
  EXPECT_EQ(occurrences(text,
                        ":3 [lanes] NCCL INFO NCCL variables that mean nothing to Lanes and are "
                        "ignored: NCCL_MIN_NCHANNELS=4\n"),
            1u)
      << text;
}

}  // namespace
}  // namespace lanes

namespace lanes {
namespace {

TEST_F(NcclEnv, MessagesUseNcclNamesOnlyWhileEnabled) {
  const std::string raw =
      "lanesCommAbort: comm is NULL; start from lanesConfig_t (run with LANES_DEBUG=WARN), "
      "LANES_TIMEOUT, mylanesThing, lanes ranks";
  EXPECT_EQ(ncclSpelling(raw), raw);
  setNcclEnvironmentForTest(true);
  EXPECT_EQ(ncclSpelling(raw),
            "ncclCommAbort: comm is NULL; start from ncclConfig_t (run with NCCL_DEBUG=WARN), "
            "LANES_TIMEOUT, mylanesThing, lanes ranks");
}

}  // namespace
}  // namespace lanes
