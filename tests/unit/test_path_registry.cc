// Path choice as data (planner/registry.h): the device paths reproduce the
// ladder they replaced, and LANES_ALGO / LANES_PROTO lists in NCCL's syntax
// restrict both them and the host algorithms (whose costs test_host_costs.cc
// checks).
#include <gtest/gtest.h>

#include <cstdlib>

#include "base/name_list.h"
#include "planner/registry.h"

namespace lanes {
namespace {

// LANES_PROTO's names: the device path registry's entries.
const std::vector<std::string>& names() {
  static const std::vector<std::string> n = {"shared_context", "ll",        "ll_threads", "staged",
                                             "pairs",          "p2p_pairs", "proxy"};
  return n;
}

const std::vector<std::string> kNames = {"alpha", "beta", "gamma"};

TEST(NameList, UnsetAllowsWhatIsOnByDefault) {
  NameList l;
  ASSERT_TRUE(NameList::parse("", kNames, &l));
  EXPECT_FALSE(l.set());
  EXPECT_TRUE(l.allows("alpha", true));
  EXPECT_FALSE(l.allows("gamma", false));
}

TEST(NameList, ListAllowsOnlyItsNamesIncludingOnesOffByDefault) {
  NameList l;
  ASSERT_TRUE(NameList::parse(" Alpha , GAMMA", kNames, &l));
  EXPECT_TRUE(l.allows("alpha", true));
  EXPECT_FALSE(l.allows("beta", true));
  EXPECT_TRUE(l.allows("gamma", false));
}

TEST(NameList, CaretExcludesAndKeepsTheDefaultsOfTheRest) {
  NameList l;
  ASSERT_TRUE(NameList::parse("^beta", kNames, &l));
  EXPECT_TRUE(l.allows("alpha", true));
  EXPECT_FALSE(l.allows("beta", true));
  EXPECT_FALSE(l.allows("gamma", false));
}

TEST(NameList, UnknownNameIsRefusedNamingTheValidOnes) {
  NameList l;
  Status s = NameList::parse("alpha,delta", kNames, &l);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("\"delta\""), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("alpha, beta, gamma"), std::string::npos) << s.message();
  EXPECT_FALSE(NameList::parse(",", kNames, &l));
}

TEST(HostAlgorithmChoice, AlgoListRestrictsAndFallsBackWhereItServesNothing) {
  SelectionConfig config;
  ASSERT_TRUE(NameList::parse("ring", {"ring", "recursive_doubling", "chain", "pairwise", "direct"},
                              &config.algo));
  EXPECT_EQ(chooseHostAlgorithm(CollType::AllReduce, 8, 4, config).algo, AlgoId::Ring);
  AlgoChoice bcast = chooseHostAlgorithm(CollType::Broadcast, 8, 4, config);
  EXPECT_EQ(bcast.algo, AlgoId::Chain);
  EXPECT_NE(bcast.why.find("names nothing that serves broadcast"), std::string::npos) << bcast.why;
  ASSERT_TRUE(NameList::parse(
      "^chain", {"ring", "recursive_doubling", "chain", "pairwise", "direct"}, &config.algo));
  EXPECT_EQ(chooseHostAlgorithm(CollType::Broadcast, 8, 4, config).algo, AlgoId::Direct);
  // Recursive doubling where it cannot serve (all-gather on 3 ranks): the default.
  ASSERT_TRUE(NameList::parse("recursive_doubling",
                              {"ring", "recursive_doubling", "chain", "pairwise", "direct"},
                              &config.algo));
  EXPECT_EQ(chooseHostAlgorithm(CollType::AllGather, 8, 3, config).algo, AlgoId::Ring);
  EXPECT_EQ(chooseHostAlgorithm(CollType::AllReduce, 256 << 20, 4, config).algo,
            AlgoId::RecursiveDoubling);
}

// Four ranks of one host, as processes, every path set up as by default.
CallFacts deviceCall(CollType coll, size_t bytes) {
  CallFacts f;
  f.coll = coll;
  f.bytes = bytes;
  f.nranks = 4;
  f.device = true;
  f.ll = {true, 16 << 10};
  f.staged = {true, true, 0};
  return f;
}

TEST(DevicePathChoice, FollowsTheOrderThePathsWereMeasuredIn) {
  const SelectionConfig config;
  auto path = [&](const CallFacts& f) { return chooseDevicePath(f, config).path; };
  EXPECT_EQ(path(deviceCall(CollType::AllReduce, 1024)), DevicePath::Ll);
  EXPECT_EQ(path(deviceCall(CollType::AllReduce, 16 << 10)), DevicePath::Ll);
  EXPECT_EQ(path(deviceCall(CollType::AllReduce, (16 << 10) + 4)), DevicePath::Staged);
  EXPECT_EQ(path(deviceCall(CollType::AllGather, 1024)), DevicePath::Ll);
  EXPECT_EQ(path(deviceCall(CollType::Broadcast, 1024)), DevicePath::Staged);
  EXPECT_EQ(path(deviceCall(CollType::Reduce, 1024)), DevicePath::Proxy);
  EXPECT_EQ(path(deviceCall(CollType::AlltoAll, 64 << 20)), DevicePath::Proxy);

  CallFacts batch = deviceCall(CollType::AllReduce, 1024);
  batch.calls = 3;  // a group of all-reduces: staged, not LL
  EXPECT_EQ(path(batch), DevicePath::Staged);
  batch.sameColl = false;
  EXPECT_EQ(path(batch), DevicePath::Proxy);

  CallFacts gs = deviceCall(CollType::ReduceScatter, 1 << 20);
  gs.staged.gatherScatter = false;  // a rank set LANES_STAGED_COLLECTIVES=0
  EXPECT_EQ(path(gs), DevicePath::Proxy);

  CallFacts shared = deviceCall(CollType::AllReduce, 1 << 20);
  shared.staged.proxyUpToBytes = 256 << 10;  // processes share a GPU
  EXPECT_EQ(path(shared), DevicePath::Staged);
  shared.bytes = 256 << 10;
  shared.ll.ready = false;
  EXPECT_EQ(path(shared), DevicePath::Proxy);

  CallFacts hosts = deviceCall(CollType::AllReduce, 1024);
  hosts.oneHost = false;
  hosts.ll.ready = hosts.staged.ready = false;
  EXPECT_EQ(path(hosts), DevicePath::Proxy);

  CallFacts mixed = deviceCall(CollType::AllReduce, 1 << 20);
  mixed.threadRanks = mixed.threadsBesideProcesses = true;
  EXPECT_EQ(path(mixed), DevicePath::Proxy);
}

TEST(DevicePathChoice, ThreadRanksTakeSharedContextThenStagedNotLl) {
  const SelectionConfig config;
  CallFacts f = deviceCall(CollType::AllReduce, 1024);
  f.threadRanks = true;
  EXPECT_EQ(chooseDevicePath(f, config).path, DevicePath::Staged);  // LL: not for threads
  f.sharedContext = {true, 256 << 10};
  EXPECT_EQ(chooseDevicePath(f, config).path, DevicePath::SharedContext);
  f.bytes = 1 << 20;
  EXPECT_EQ(chooseDevicePath(f, config).path, DevicePath::Staged);
}

TEST(DevicePathChoice, ProtoListExcludesPathsAndEnablesLlThreadsOnlyByName) {
  SelectionConfig config;
  ASSERT_TRUE(NameList::parse("^ll", names(), &config.proto));
  EXPECT_EQ(chooseDevicePath(deviceCall(CollType::AllReduce, 1024), config).path,
            DevicePath::Staged);
  ASSERT_TRUE(NameList::parse("^ll,staged", names(), &config.proto));
  EXPECT_EQ(chooseDevicePath(deviceCall(CollType::AllReduce, 1024), config).path,
            DevicePath::Proxy);
  // The proxy serves what nothing allowed does, even left out.
  ASSERT_TRUE(NameList::parse("ll", names(), &config.proto));
  EXPECT_EQ(chooseDevicePath(deviceCall(CollType::Reduce, 1024), config).path, DevicePath::Proxy);

  CallFacts threads = deviceCall(CollType::AllReduce, 1024);
  threads.threadRanks = true;
  config = SelectionConfig();
  EXPECT_FALSE(pathAllowed(config, DevicePath::LlThreads));
  EXPECT_EQ(chooseDevicePath(threads, config).path, DevicePath::Staged);
  ASSERT_TRUE(NameList::parse("ll_threads,staged,proxy", names(), &config.proto));
  EXPECT_TRUE(pathAllowed(config, DevicePath::LlThreads));
  EXPECT_EQ(chooseDevicePath(threads, config).path, DevicePath::LlThreads);
}

// One send or receive to another rank of this host, with the staged path's pair slots.
CallFacts onePairCall(size_t bytes) {
  CallFacts f;
  f.device = true;
  f.p2p = true;
  f.calls = 0;
  f.p2pCalls = 1;
  f.bytes = bytes;
  f.nranks = 2;
  f.staged.ready = true;
  f.pairs.ready = true;
  return f;
}

TEST(DevicePathChoice, SendsAndReceivesTakeThePairSlotsOneAtATime) {
  SelectionConfig config;
  EXPECT_EQ(chooseDevicePath(onePairCall(1 << 20), config).path, DevicePath::Pairs);
  // To itself, several at once, without slots, or on another host: the proxy.
  CallFacts self = onePairCall(1 << 20);
  self.p2pSelf = true;
  EXPECT_EQ(chooseDevicePath(self, config).path, DevicePath::Proxy);
  CallFacts two = onePairCall(1 << 20);
  two.p2pCalls = 2;
  EXPECT_EQ(chooseDevicePath(two, config).path, DevicePath::Proxy);
  CallFacts none = onePairCall(1 << 20);
  none.pairs.ready = false;
  EXPECT_EQ(chooseDevicePath(none, config).path, DevicePath::Proxy);
  CallFacts hosts = onePairCall(1 << 20);
  hosts.oneHost = false;
  EXPECT_EQ(chooseDevicePath(hosts, config).path, DevicePath::Proxy);
  // Processes sharing a GPU keep small ones on the proxy.
  CallFacts shared = onePairCall(64 << 10);
  shared.staged.proxyUpToBytes = 256 << 10;
  EXPECT_EQ(chooseDevicePath(shared, config).path, DevicePath::Proxy);
  shared.bytes = 1 << 20;
  EXPECT_EQ(chooseDevicePath(shared, config).path, DevicePath::Pairs);
  // Slots in GPU memory are p2p_pairs', which only LANES_PROTO turns on.
  CallFacts gpu = onePairCall(1 << 20);
  gpu.pairs.inGpuMemory = true;
  EXPECT_FALSE(pathAllowed(config, DevicePath::P2pPairs));
  ASSERT_TRUE(NameList::parse("staged,pairs,p2p_pairs,proxy", names(), &config.proto));
  EXPECT_EQ(chooseDevicePath(gpu, config).path, DevicePath::P2pPairs);
  ASSERT_TRUE(NameList::parse("^pairs", names(), &config.proto));
  EXPECT_EQ(chooseDevicePath(onePairCall(1 << 20), config).path, DevicePath::Proxy);
}

TEST(PlanName, NamesThePathAndTheProxysAlgorithm) {
  const SelectionConfig config;
  EXPECT_EQ(planName(deviceCall(CollType::AllReduce, 1024), config), "ll");
  EXPECT_EQ(planName(deviceCall(CollType::Broadcast, 1 << 20), config), "staged");
  EXPECT_EQ(planName(deviceCall(CollType::Reduce, 1 << 20), config), "proxy/chain");
  CallFacts host = deviceCall(CollType::AllReduce, 64 << 20);
  host.device = false;
  EXPECT_EQ(planName(host, config), "ring");
}

TEST(SelectionConfig, AlgoListTakesTheAliasesLanesAlgoAlwaysTook) {
  ::setenv("LANES_ALGO", "^RD, chain", 1);
  const SelectionConfig c = SelectionConfig::fromEnv();
  ::unsetenv("LANES_ALGO");
  ASSERT_TRUE(c.algo.set());
  EXPECT_FALSE(c.algo.allows("recursive_doubling", true));
  EXPECT_FALSE(c.algo.allows("chain", true));
  EXPECT_TRUE(c.algo.allows("ring", true));
  EXPECT_EQ(chooseHostAlgorithm(CollType::AllReduce, 8, 4, c).algo, AlgoId::Ring);
}

TEST(SelectionConfig, BadListsWarnAndKeepTheDefaults) {
  ::setenv("LANES_PROTO", "ll,nvls", 1);
  ::setenv("LANES_ALGO", "^tree", 1);
  const SelectionConfig c = SelectionConfig::fromEnv();
  ::unsetenv("LANES_PROTO");
  ::unsetenv("LANES_ALGO");
  EXPECT_FALSE(c.proto.set());
  EXPECT_FALSE(c.algo.set());
  EXPECT_TRUE(pathAllowed(c, DevicePath::Staged));
}

}  // namespace
}  // namespace lanes
