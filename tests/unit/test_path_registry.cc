// Path choice as data (planner/registry.h): eligibility says what each device
// path may serve, the cost model (planner/device_costs.h) orders the
// eligible, and LANES_ALGO / LANES_PROTO lists in NCCL's syntax restrict both
// them and the host algorithms (whose costs test_host_costs.cc checks).
#include <gtest/gtest.h>

#include <cstdlib>

#include "base/name_list.h"
#include "kernels/cuda/simple_collective.h"
#include "planner/device_costs.h"
#include "planner/plan_cache.h"
#include "planner/registry.h"

namespace lanes {
namespace {

// LANES_PROTO's names: the device path registry's entries.
const std::vector<std::string>& names() {
  static const std::vector<std::string> n = {
      "shared_context", "ll",    "ll_threads", "simple",   "staged",
      "host_sum",       "pairs", "p2p_pairs",  "ll_pairs", "proxy"};
  return n;
}

const std::vector<std::string> kNames = {"alpha", "beta", "gamma"};
// LANES_ALGO's names: the host algorithms.
const std::vector<std::string> kHostNames = {
    "ring", "recursive_doubling", "chain", "pairwise", "direct", "tree", "hierarchical"};

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
  ASSERT_TRUE(NameList::parse("ring", kHostNames, &config.algo));
  EXPECT_EQ(chooseHostAlgorithm(CollType::AllReduce, 8, 4, config).algo, AlgoId::Ring);
  AlgoChoice bcast = chooseHostAlgorithm(CollType::Broadcast, 8, 4, config);
  EXPECT_EQ(bcast.algo, AlgoId::Chain);
  EXPECT_NE(bcast.why.find("names nothing that serves broadcast"), std::string::npos) << bcast.why;
  // Without the chain, the tree, priced like it for rooted calls.
  ASSERT_TRUE(NameList::parse("^chain", kHostNames, &config.algo));
  EXPECT_EQ(chooseHostAlgorithm(CollType::Broadcast, 8, 4, config).algo, AlgoId::Tree);
  ASSERT_TRUE(NameList::parse("^chain,tree", kHostNames, &config.algo));
  EXPECT_EQ(chooseHostAlgorithm(CollType::Broadcast, 8, 4, config).algo, AlgoId::Direct);
  // Recursive doubling where it cannot serve (all-gather on 3 ranks): the default.
  ASSERT_TRUE(NameList::parse("recursive_doubling", kHostNames, &config.algo));
  EXPECT_EQ(chooseHostAlgorithm(CollType::AllGather, 8, 3, config).algo, AlgoId::Ring);
  EXPECT_EQ(chooseHostAlgorithm(CollType::AllReduce, 256 << 20, 4, config).algo,
            AlgoId::RecursiveDoubling);
}

// The hierarchical collectives serve ranks on several hosts, as many on
// each: they win where the network is the bottleneck (one step crosses it;
// an all-reduce carries 2(H-1)/H of the buffer, against 2(N-1)/N for the
// flat ring), and are no candidate on one host or uneven hosts.
TEST(HostAlgorithmChoice, HierarchicalWhereRanksSpanHostsEvenly) {
  SelectionConfig two;  // 2 hosts x 4 ranks, a slow network (2.5 Gb/s)
  two.machine.hosts = 2;
  two.machine.ranksPerHost = 4;
  two.machine.cores = 8;
  two.machine.socketGBs = 0.3;
  auto ranked = [](CollType coll, size_t bytes, int n, const SelectionConfig& config) {
    CallFacts f;
    f.coll = coll;
    f.bytes = bytes;
    f.nranks = n;
    return rankHostAlgorithms(f, config);
  };
  auto has = [](const std::vector<HostCandidate>& r, AlgoId a) {
    return std::any_of(r.begin(), r.end(), [&](const HostCandidate& c) { return c.algo == a; });
  };
  const std::vector<HostCandidate> big = ranked(CollType::AllReduce, 64 << 20, 8, two);
  ASSERT_FALSE(big.empty());
  EXPECT_EQ(big.front().algo, AlgoId::Hierarchical);
  EXPECT_EQ(big.front().cost.deciding().rfind("transfer ", 0), 0u);
  double ring = 0;
  for (const HostCandidate& c : big)
    if (c.algo == AlgoId::Ring) ring = c.cost.total();
  // 2(7/8) of the buffer over the network against 2(1/2), less the hosts' own steps.
  EXPECT_GT(ring, 1.3 * big.front().cost.total());
  // All-gather and reduce-scatter (FSDP's): the link carries (H-1)L blocks
  // each way, not N-1 per ring hop.
  for (CollType coll : {CollType::AllGather, CollType::ReduceScatter}) {
    const std::vector<HostCandidate> r = ranked(coll, 64 << 20, 8, two);
    ASSERT_FALSE(r.empty());
    EXPECT_EQ(r.front().algo, AlgoId::Hierarchical) << collTypeName(coll);
  }
  // Not where it cannot run: other collectives, one host, uneven hosts, one rank a host.
  EXPECT_FALSE(has(ranked(CollType::Broadcast, 64 << 20, 8, two), AlgoId::Hierarchical));
  SelectionConfig one = two;
  one.machine.hosts = 1;
  one.machine.ranksPerHost = 0;
  EXPECT_FALSE(has(ranked(CollType::AllReduce, 64 << 20, 8, one), AlgoId::Hierarchical));
  SelectionConfig uneven = two;
  uneven.machine.ranksPerHost = 0;
  EXPECT_FALSE(has(ranked(CollType::AllReduce, 64 << 20, 8, uneven), AlgoId::Hierarchical));
  SelectionConfig spread = two;
  spread.machine.hosts = 8;
  spread.machine.ranksPerHost = 1;
  EXPECT_FALSE(has(ranked(CollType::AllReduce, 64 << 20, 8, spread), AlgoId::Hierarchical));
  // LANES_ALGO=hierarchical where it cannot run: the cheapest that can, saying why.
  ASSERT_TRUE(NameList::parse("hierarchical", kHostNames, &one.algo));
  const AlgoChoice fallback = chooseHostAlgorithm(CollType::AllReduce, 64 << 20, 8, one);
  EXPECT_NE(fallback.algo, AlgoId::Hierarchical);
  EXPECT_NE(fallback.why.find("names nothing that serves"), std::string::npos) << fallback.why;
}

// Four ranks of one host, as processes, one GPU each, every path set up as
// by default; the cost model's assumed inputs unless a test sets others.
CallFacts deviceCall(CollType coll, size_t bytes) {
  CallFacts f;
  f.coll = coll;
  f.bytes = bytes;
  f.nranks = 4;
  f.device = true;
  f.ll = {true, SelectionConfig().llMaxBytes};
  f.staged = {true, true, 0};
  return f;
}

DevicePath pathOf(const CallFacts& f, const SelectionConfig& config = SelectionConfig()) {
  return chooseDevicePath(f, config).path;
}

// LANES_PROTO=^host_sum: the choice between the staged path and the rest.
SelectionConfig withoutHostSum(SelectionConfig config = SelectionConfig()) {
  EXPECT_TRUE(NameList::parse("^host_sum", names(), &config.proto));
  return config;
}

// What a path can serve is eligibility, whatever the costs say (host
// summation left out where the test is about the staged path).
TEST(DevicePathChoice, EligibilityDecidesWhatEachPathMayServe) {
  const SelectionConfig staged = withoutHostSum();
  EXPECT_EQ(pathOf(deviceCall(CollType::Reduce, 1 << 20)), DevicePath::Proxy);  // past LL
  EXPECT_EQ(pathOf(deviceCall(CollType::AlltoAll, 64 << 20)), DevicePath::Proxy);
  for (CollType c : {CollType::AlltoAll, CollType::Gather, CollType::Scatter})  // never LL
    EXPECT_EQ(pathOf(deviceCall(c, 64)), DevicePath::Proxy) << collTypeName(c);
  EXPECT_EQ(pathOf(deviceCall(CollType::AllReduce, 1 << 30), staged), DevicePath::Staged);
  EXPECT_NE(pathOf(deviceCall(CollType::AllReduce, SelectionConfig::kLlHardMaxBytes + 4)),
            DevicePath::Ll);

  CallFacts mixedBatch = deviceCall(CollType::AllReduce, 1 << 30);
  mixedBatch.calls = 3;
  EXPECT_EQ(pathOf(mixedBatch, staged), DevicePath::Staged);  // a group of all-reduces
  EXPECT_EQ(pathOf(mixedBatch), DevicePath::HostSum);         // which host summation serves too
  mixedBatch.sameColl = false;
  EXPECT_EQ(pathOf(mixedBatch), DevicePath::Proxy);

  CallFacts gs = deviceCall(CollType::ReduceScatter, 1 << 30);
  EXPECT_EQ(pathOf(gs, staged), DevicePath::Staged);
  gs.staged.gatherScatter = false;  // a rank set LANES_STAGED_COLLECTIVES=0
  EXPECT_EQ(pathOf(gs), DevicePath::Proxy);

  // Processes sharing a GPU: small all-reduces stay off the staged path.
  CallFacts shared = deviceCall(CollType::AllReduce, 256 << 10);
  shared.staged.proxyUpToBytes = 256 << 10;
  shared.ll.ready = false;
  EXPECT_EQ(pathOf(shared), DevicePath::Proxy);
  shared.bytes = 64 << 20;
  EXPECT_EQ(pathOf(shared, staged), DevicePath::Staged);

  CallFacts hosts = deviceCall(CollType::AllReduce, 1 << 30);
  hosts.oneHost = false;
  hosts.ll.ready = hosts.staged.ready = false;
  EXPECT_EQ(pathOf(hosts), DevicePath::Proxy);

  CallFacts mixed = deviceCall(CollType::AllReduce, 1 << 30);
  mixed.threadRanks = mixed.threadsBesideProcesses = true;
  EXPECT_EQ(pathOf(mixed), DevicePath::Proxy);
}

// LL serves one call of each collective but all-to-all whose input per rank
// fits the slot (LANES_PROTO=ll: eligibility alone decides), and is the
// cheapest at 8 bytes. With LANES_LL_MAX_BYTES=16K, a reduce-scatter's blocks
// each post in whole 8-byte lines: 3 blocks of 5461 bytes (16383 in all)
// take 3 x 5464, over 16 KiB.
TEST(DevicePathChoice, LlServesEveryCollectiveThatFitsItsSlot) {
  SelectionConfig llOnly;
  ASSERT_TRUE(NameList::parse("ll", names(), &llOnly.proto));
  const size_t limit = 16 << 10;
  auto call = [&](CollType c, size_t bytes) {
    CallFacts f = deviceCall(c, bytes);
    f.ll.maxBytes = limit;
    return f;
  };
  for (CollType c : {CollType::AllReduce, CollType::AllGather, CollType::ReduceScatter,
                     CollType::Broadcast, CollType::Reduce}) {
    EXPECT_EQ(pathOf(call(c, 8)), DevicePath::Ll) << collTypeName(c);
    EXPECT_EQ(pathOf(call(c, limit), llOnly), DevicePath::Ll) << collTypeName(c);
    EXPECT_NE(pathOf(call(c, limit + 8), llOnly), DevicePath::Ll) << collTypeName(c);
    const size_t hard = SelectionConfig::kLlHardMaxBytes;  // the default
    EXPECT_EQ(pathOf(deviceCall(c, hard), llOnly), DevicePath::Ll) << collTypeName(c);
    EXPECT_NE(pathOf(deviceCall(c, hard + 8), llOnly), DevicePath::Ll) << collTypeName(c);
  }
  CallFacts scatter = call(CollType::ReduceScatter, 3 * 5461);
  scatter.nranks = 3;
  EXPECT_NE(pathOf(scatter, llOnly), DevicePath::Ll);
  scatter.bytes = 3 * 5456;
  EXPECT_EQ(pathOf(scatter, llOnly), DevicePath::Ll);
  CallFacts batch = call(CollType::Broadcast, 64);
  batch.calls = 2;
  EXPECT_NE(pathOf(batch, llOnly), DevicePath::Ll);  // one request per call
}

// LL's link time counts the ranks that write and read on a GPU: 4 ranks on
// one GPU, S bytes each, lines of 2S. An all-reduce has all 4 write 2S and
// read 3 x 2S; a broadcast's root alone writes and the 3 others read 2S; a
// reduce's 4 write and its root alone reads 3 x 2S. (The assumed machine
// moves both directions at one rate.)
TEST(DevicePathChoice, LlPricesEachLinkByTheRanksThatWriteAndReadOnIt) {
  const MachineFacts m;
  CallFacts f = deviceCall(CollType::AllReduce, 64 << 10);
  f.ranksPerGpu = 4;
  auto transfer = [&](CollType c) {
    f.coll = c;
    return devicePathCost(DevicePath::Ll, f, m, CostTerms{}).transfer;
  };
  const double allReduce = transfer(CollType::AllReduce);
  ASSERT_GT(allReduce, 0);
  EXPECT_NEAR(transfer(CollType::Broadcast) / allReduce, (1 + 3) / 16.0, 1e-9);
  EXPECT_NEAR(transfer(CollType::Reduce) / allReduce, (4 + 3) / 16.0, 1e-9);
  EXPECT_NEAR(transfer(CollType::AllGather) / allReduce, 1.0, 1e-9);
}

// The simple kernel posts only bytes a peer reads. With 2 ranks on one GPU a
// reduce-scatter of S (each rank writes the peer's half and reads its own)
// moves what an all-gather of S/2 a rank does, and costs alike; a reduce (the
// non-root writes S, the root reads it) moves what a broadcast does, but the
// broadcast's first chunk is not on the critical path: while the link bounds
// (as here) it costs one chunk's shorter stage less, in a pipeline of
// chunks + 1 stages.
TEST(DevicePathChoice, SimplePricesOnlyTheBytesAPeerReads) {
  const MachineFacts m;
  CallFacts f = deviceCall(CollType::AllReduce, 0);
  f.nranks = 2;
  f.ranksPerGpu = 2;
  f.simple = {true, size_t{4} << 20};
  auto cost = [&](CollType c, size_t bytes) {
    f.coll = c;
    f.bytes = bytes;
    return devicePathCost(DevicePath::Simple, f, m, CostTerms{});
  };
  for (size_t s : {size_t{256} << 10, size_t{1} << 20, size_t{4} << 20}) {
    SCOPED_TRACE(s);
    const double chunks = static_cast<double>(s / cuda::kSimpleChunkBytes);
    const CostTerms reduce = cost(CollType::Reduce, s), broadcast = cost(CollType::Broadcast, s);
    ASSERT_GT(reduce.total(), 0);
    EXPECT_DOUBLE_EQ(broadcast.latency, reduce.latency);
    EXPECT_LT(broadcast.total(), reduce.total());
    EXPECT_GE(broadcast.total(), reduce.total() - reduce.transfer / (chunks + 1) - 1e-12);
    const CostTerms scatter = cost(CollType::ReduceScatter, s);
    const CostTerms gather = cost(CollType::AllGather, s / 2);
    EXPECT_NEAR(scatter.total(), gather.total(), 1e-12);
    // An all-reduce has both ranks post and read all of S: more than either.
    EXPECT_GT(cost(CollType::AllReduce, s).total(), scatter.total());
  }
}

// Among the eligible, the cheapest: LL while latency decides, a pipeline
// through host memory once bytes do (for four ranks' all-reduce, host
// summation's: its bytes cross each link once each way); the proxy's one
// hand-off wins a batch of small all-reduces, which the staged path runs
// call after call.
TEST(DevicePathChoice, TheCostModelOrdersTheEligible) {
  EXPECT_EQ(pathOf(deviceCall(CollType::AllReduce, 8)), DevicePath::Ll);
  EXPECT_EQ(pathOf(deviceCall(CollType::AllGather, 1024)), DevicePath::Ll);
  EXPECT_EQ(pathOf(deviceCall(CollType::AllReduce, 64 << 20)), DevicePath::HostSum);
  EXPECT_EQ(pathOf(deviceCall(CollType::AllReduce, 64 << 20), withoutHostSum()),
            DevicePath::Staged);
  EXPECT_EQ(pathOf(deviceCall(CollType::Broadcast, 64 << 20)), DevicePath::Staged);
  CallFacts batch = deviceCall(CollType::AllReduce, 3 << 10);
  batch.calls = 3;
  EXPECT_EQ(pathOf(batch), DevicePath::Proxy);

  // The ranking lists every eligible path once, cheapest first, and the
  // choice is its first allowed one.
  const SelectionConfig config;
  for (size_t bytes : {size_t{8}, size_t{32} << 10, size_t{1} << 20, size_t{256} << 20}) {
    const std::vector<DeviceCandidate> ranked =
        rankDevicePaths(deviceCall(CollType::AllReduce, bytes), config);
    ASSERT_FALSE(ranked.empty());
    for (size_t i = 1; i < ranked.size(); ++i)
      EXPECT_LE(ranked[i - 1].cost.total(), ranked[i].cost.total()) << bytes;
    EXPECT_EQ(pathOf(deviceCall(CollType::AllReduce, bytes)), ranked.front().path) << bytes;
  }
}

// Thread ranks never take the proxy where the staged path serves the call:
// their streams would wait on a flag the proxy thread raises after copies it
// enqueues later (docs/gpu_data_path.md). Processes may, where it is cheaper.
TEST(DevicePathChoice, ThreadRanksTakeSharedContextOrStagedNeverTheProxy) {
  const SelectionConfig staged = withoutHostSum();
  CallFacts f = deviceCall(CollType::AllReduce, 32 << 10);
  f.ll.ready = false;  // processes without LL: the proxy is cheaper than the staged pipeline
  EXPECT_EQ(pathOf(f, staged), DevicePath::Proxy);
  f.threadRanks = true;
  EXPECT_EQ(pathOf(f, staged), DevicePath::Staged);  // LL: not for threads unless named
  f.sharedContext = {true, 256 << 10};
  EXPECT_EQ(pathOf(f), DevicePath::SharedContext);
  f.bytes = 1 << 20;
  EXPECT_EQ(pathOf(f, staged), DevicePath::Staged);
  SelectionConfig noStaged;
  ASSERT_TRUE(NameList::parse("^staged,host_sum", names(), &noStaged.proto));
  EXPECT_EQ(pathOf(f, noStaged), DevicePath::Proxy);  // the last resort
  f.coll = CollType::Reduce;
  EXPECT_EQ(pathOf(f), DevicePath::Proxy);  // what staged does not serve
}

// The price follows the machine: a narrow link bounds the staged all-reduce
// (its pipeline overlaps down and up, so it stays ahead of the proxy, which
// copies its input down and the result up one after the other); slow host
// memory bounds the staged pipeline and the explanation says so; ranks
// sharing a GPU share its link.
TEST(DevicePathChoice, TheWinnerFollowsLinkWidthAndHostMemory) {
  const CallFacts mib = deviceCall(CollType::AllReduce, 1 << 20);
  SelectionConfig fast = withoutHostSum();
  fast.machine.memGBs = 100;
  EXPECT_EQ(pathOf(mib, fast), DevicePath::Staged);
  SelectionConfig narrow = fast;
  for (int i = 0; i < MachineFacts::kCurvePoints; ++i) {
    narrow.machine.gpu.h2dGBs[i] /= 8;  // x16 down to x2
    narrow.machine.gpu.d2hGBs[i] /= 8;
  }
  // The first of each ranking that LANES_PROTO allows (host summation is left out).
  auto allowed = [](std::vector<DeviceCandidate> r) {
    std::erase_if(r, [](const DeviceCandidate& c) { return !c.allowed; });
    return r;
  };
  const DeviceCandidate onFast = allowed(rankDevicePaths(mib, fast)).front();
  const DeviceCandidate onNarrow = allowed(rankDevicePaths(mib, narrow)).front();
  EXPECT_EQ(onNarrow.path, DevicePath::Staged);
  EXPECT_GT(onNarrow.cost.total(), 4 * onFast.cost.total());
  EXPECT_EQ(onNarrow.cost.deciding().rfind("transfer ", 0), 0u) << onNarrow.cost.deciding();

  const CallFacts big = deviceCall(CollType::AllReduce, 64 << 20);
  SelectionConfig slowMemory = fast;
  slowMemory.machine.memGBs = 4;
  const std::vector<DeviceCandidate> fastRanked = allowed(rankDevicePaths(big, fast));
  const std::vector<DeviceCandidate> slowRanked = allowed(rankDevicePaths(big, slowMemory));
  ASSERT_EQ(fastRanked.front().path, DevicePath::Staged);
  ASSERT_EQ(slowRanked.front().path, DevicePath::Staged);
  EXPECT_GT(slowRanked.front().cost.total(), 3 * fastRanked.front().cost.total());
  EXPECT_EQ(fastRanked.front().cost.deciding().rfind("transfer ", 0), 0u);
  EXPECT_EQ(slowRanked.front().cost.deciding().rfind("host memory ", 0), 0u);
  CallFacts sharing = big;
  sharing.ranksPerGpu = 4;
  EXPECT_GT(allowed(rankDevicePaths(sharing, fast)).front().cost.total(),
            2 * fastRanked.front().cost.total());
}

// Host summation moves each GPU's bytes down once and up once (the staged
// all-reduce: 2(N-1)/N up) and sums them on the host's cores: it wins where
// the link bounds and the host has memory bandwidth and cores to spare (the
// measurement that motivated it: 8 ranks through one x16 link), and loses
// with two ranks (the same bytes up, plus more host memory traffic: 5 chunks'
// worth against the staged path's 4) and with one core. It needs the slots
// in host memory and serves all-reduce and reduce-scatter only.
TEST(DevicePathChoice, HostSummationWinsWhereTheLinksBoundAndTheHostHasRoom) {
  SelectionConfig box;  // 16 cores, host memory above the link
  box.machine.cores = 16;
  box.machine.memGBs = 40;
  CallFacts eight = deviceCall(CollType::AllReduce, 256 << 20);
  eight.nranks = 8;
  eight.ranksPerGpu = 8;
  eight.staged.hostSumThreads = 2;
  const std::vector<DeviceCandidate> ranked = rankDevicePaths(eight, box);
  ASSERT_EQ(ranked.front().path, DevicePath::HostSum);
  EXPECT_EQ(ranked.front().cost.deciding().rfind("transfer ", 0), 0u);
  // A reduce-scatter gains nothing on the link: the staged one moves (N-1)/N
  // of the input each way, host summation all of it down.
  CallFacts scatter = eight;
  scatter.coll = CollType::ReduceScatter;
  const std::vector<DeviceCandidate> scatterRanked = rankDevicePaths(scatter, box);
  ASSERT_GE(scatterRanked.size(), 2u);
  EXPECT_EQ(scatterRanked[0].path, DevicePath::Staged);
  EXPECT_EQ(scatterRanked[1].path, DevicePath::HostSum);

  CallFacts two = eight;
  two.nranks = two.ranksPerGpu = 2;
  EXPECT_EQ(pathOf(two, box), DevicePath::Staged);
  SelectionConfig oneCore = box;
  oneCore.machine.cores = 1;
  CallFacts single = eight;
  single.staged.hostSumThreads = 1;
  EXPECT_EQ(pathOf(single, oneCore), DevicePath::Staged);
  SelectionConfig slowMemory = box;
  slowMemory.machine.memGBs = 8;
  EXPECT_EQ(pathOf(two, slowMemory), DevicePath::Staged);

  CallFacts gpuSlots = eight;
  gpuSlots.staged.inGpuMemory = true;
  for (const DeviceCandidate& c : rankDevicePaths(gpuSlots, box))
    EXPECT_NE(c.path, DevicePath::HostSum);
  for (CollType coll : {CollType::AllGather, CollType::Broadcast}) {
    CallFacts f = eight;
    f.coll = coll;
    for (const DeviceCandidate& c : rankDevicePaths(f, box)) EXPECT_NE(c.path, DevicePath::HostSum);
  }
  SelectionConfig forced = box;
  ASSERT_TRUE(NameList::parse("host_sum", names(), &forced.proto));
  EXPECT_EQ(pathOf(two, forced), DevicePath::HostSum);
}

// A compressed wire shrinks what host summation moves over the link and
// through host memory (not the staged path's, which never compresses), so
// with two ranks, where host summation loses uncompressed, bf16 frames make
// it the cheapest; fp8's costlier encoding still leaves it ahead of native
// with the assumed codec figures.
// A batch that is not float32 sums has no wire in its facts.
TEST(DevicePathChoice, AWireFormatPricesHostSummationAtTheFramesBytes) {
  SelectionConfig box;
  box.machine.cores = 16;
  box.machine.memGBs = 40;
  CallFacts two = deviceCall(CollType::AllReduce, 256 << 20);
  two.nranks = two.ranksPerGpu = 2;
  two.staged.hostSumThreads = 8;
  ASSERT_EQ(pathOf(two, box), DevicePath::Staged);
  auto hostSum = [&](const CallFacts& f) {
    for (const DeviceCandidate& c : rankDevicePaths(f, box))
      if (c.path == DevicePath::HostSum) return c.cost;
    ADD_FAILURE() << "no host summation candidate";
    return CostTerms{};
  };
  CallFacts bf16 = two, fp8 = two;
  bf16.wire = WireFormat::Bf16;
  fp8.wire = WireFormat::Fp8;
  EXPECT_EQ(pathOf(bf16, box), DevicePath::HostSum);
  const double native = hostSum(two).total();
  EXPECT_LT(hostSum(bf16).total(), 0.6 * native);
  EXPECT_LT(hostSum(fp8).total(), native);
  EXPECT_GT(hostSum(fp8).reduce, hostSum(bf16).reduce) << "e4m3's encode costs more";
  // The codec's probed cost decides: an e4m3 encoder ten times slower than
  // the assumed one leaves the staged path (which never compresses) cheaper.
  box.machine.wireEncodeNs[1] = 13.5;
  EXPECT_EQ(pathOf(fp8, box), DevicePath::Staged);
}

// Where the staging slots are in GPU memory (P2P, or ranks sharing one GPU's
// context), copies go at device memory's rate and skip host memory; thread
// ranks enqueue one after another, so their enqueue work adds up with the
// rank count; processes time-slicing a GPU pay a slice a peer per
// reduce-scatter, two where it spans several slots.
TEST(DevicePathChoice, StagedSlotsHandOffsAndTimeSlicesArePriced) {
  const SelectionConfig config;
  auto staged = [&](const CallFacts& f) {
    for (const DeviceCandidate& c : rankDevicePaths(f, config))
      if (c.path == DevicePath::Staged) return c.cost;
    ADD_FAILURE() << "no staged candidate";
    return CostTerms{};
  };
  CallFacts host = deviceCall(CollType::AllReduce, 64 << 20);
  host.ranksPerGpu = 4;
  CallFacts gpu = host;
  gpu.staged.inGpuMemory = true;
  EXPECT_LT(4 * staged(gpu).total(), staged(host).total());
  EXPECT_EQ(staged(gpu).memory, 0);

  CallFacts threads2 = deviceCall(CollType::AllReduce, 8);
  threads2.nranks = 2;
  CallFacts processes2 = threads2;
  threads2.threadRanks = true;
  CallFacts threads4 = threads2;
  threads4.nranks = 4;
  CallFacts processes4 = processes2;
  processes4.nranks = 4;
  // A process's enqueue is on its own critical path; thread ranks' add up.
  const double extra2 = staged(threads2).latency - staged(processes2).latency;
  const double extra4 = staged(threads4).latency - staged(processes4).latency;
  EXPECT_GT(extra2, 0);
  EXPECT_GT(extra4, 2 * extra2);

  CallFacts sliced = deviceCall(CollType::ReduceScatter, 1 << 20);
  const double unsliced = staged(sliced).total();
  sliced.timeSliced = true;
  EXPECT_NEAR(staged(sliced).total() - unsliced, 3 * 2200e-6, 1e-9);  // one slot: a slice a peer
  CallFacts large = sliced;
  large.bytes = size_t{256} << 20;  // 16 slots: two slices a peer
  const double largeUnsliced = [&] {
    CallFacts l = large;
    l.timeSliced = false;
    return staged(l).total();
  }();
  EXPECT_NEAR(staged(large).total() - largeUnsliced, 2 * 3 * 2200e-6, 1e-9);
}

// Host summation between processes of one GPU waits for hand-offs between
// their contexts, 50 us a peer and 25 a peer per chunk, under MPS as in time
// slices; thread ranks of one process and processes on their own GPUs do not.
TEST(DevicePathChoice, HostSummationPaysHandOffsBetweenProcessesOfOneGpu) {
  const SelectionConfig config;
  auto hostSum = [&](const CallFacts& f) {
    for (const DeviceCandidate& c : rankDevicePaths(f, config))
      if (c.path == DevicePath::HostSum) return c.cost.latency;
    ADD_FAILURE() << "no host summation candidate";
    return 0.0;
  };
  CallFacts own = deviceCall(CollType::AllReduce, 8);
  own.nranks = 4;
  CallFacts mps = own;  // processes of one GPU under MPS: not time-sliced
  mps.ranksPerGpu = 4;
  CallFacts sliced = mps;
  sliced.timeSliced = true;
  CallFacts threads = mps;
  threads.threadRanks = true;
  const double oneChunk = 3 * (50 + 25) * 1e-6;
  EXPECT_NEAR(hostSum(mps) - hostSum(own), oneChunk, 1e-9);
  EXPECT_NEAR(hostSum(sliced) - hostSum(own), oneChunk, 1e-9);
  EXPECT_LT(hostSum(threads) - hostSum(own), 50e-6) << "one context: no hand-offs between them";
}

// The explanation names the choice, its deciding term and the next two, and
// whether the inputs were measured: stable text, the same on every rank.
TEST(DevicePathChoice, TheExplanationIsStable) {
  SelectionConfig config;
  EXPECT_EQ(explainDeviceChoice(deviceCall(CollType::AllReduce, 8), config),
            "ll 11.5 us (latency 100%); next proxy 19.5 us, host_sum 42.6 us; assumed GPU inputs "
            "(lanes-topo --probe measures them)");
  ASSERT_TRUE(NameList::parse("staged", names(), &config.proto));
  config.machine.gpu.measured = true;
  EXPECT_EQ(explainDeviceChoice(deviceCall(CollType::AllReduce, 8), config),
            "staged 66.7 us (latency 75%, LANES_PROTO=staged); next ll 11.5 us (left out by "
            "LANES_PROTO), proxy 19.5 us (left out by LANES_PROTO); measured GPU inputs");
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

// Calls are sized by the input a rank contributes: a reduce-scatter's count
// is its output, so its input is nranks of those (as the host choice and
// lanes-topo --plan count it).
TEST(DevicePathChoice, CallsAreSizedByTheirInput) {
  CollArgs a;
  a.coll = CollType::ReduceScatter;
  a.count = 100;
  a.nranks = 4;
  EXPECT_EQ(inputCount(a), 400u);
  a.coll = CollType::AllGather;
  EXPECT_EQ(inputCount(a), 100u);
  a.coll = CollType::AllReduce;
  EXPECT_EQ(inputCount(a), 100u);
}

// The proxy runs a batch of collectives call by call on the host: a batch
// costs it about as much as its calls one at a time.
TEST(DevicePathChoice, TheProxyPricesABatchByItsCalls) {
  const SelectionConfig config;
  CallFacts one = deviceCall(CollType::AllReduce, 1 << 20);
  one.staged.ready = false;  // the proxy alone
  CallFacts batch = one;
  batch.calls = 4;
  batch.bytes = 4 << 20;
  const double single = rankDevicePaths(one, config).front().cost.total();
  const double four = rankDevicePaths(batch, config).front().cost.total();
  EXPECT_GT(four, 3.5 * single);
  EXPECT_LT(four, 4.5 * single);
}

// A communicator keeps the order per kind and size class and checks each
// call's own facts: the same answer as the uncached choice.
TEST(DevicePathChoice, ThePlanCacheAnswersAsTheChoice) {
  const SelectionConfig config;
  // Thread ranks are a fact of the rank set: a communicator's cache sees one kind.
  DevicePlanCache processCache, threadCache;
  for (CollType coll : {CollType::AllReduce, CollType::AllGather, CollType::Broadcast,
                        CollType::ReduceScatter, CollType::Reduce}) {
    for (size_t bytes = 0; bytes <= (size_t{1} << 30); bytes = bytes * 3 + 1) {
      for (int shape = 0; shape < 4; ++shape) {
        DevicePlanCache& cache = shape == 1 ? threadCache : processCache;
        CallFacts f = deviceCall(coll, bytes);
        f.threadRanks = shape == 1;
        if (shape == 2) f.calls = 3;  // a group of them
        if (shape == 3) f.sameColl = false, f.calls = 2;
        EXPECT_EQ(cache.choose(f, config), pathOf(f, config))
            << collTypeName(coll) << " " << bytes << " shape " << shape;
        EXPECT_EQ(cache.choose(f, config), pathOf(f, config)) << "again, from the cache";
      }
    }
  }
  for (size_t bytes : {size_t{0}, size_t{8}, size_t{1} << 20}) {
    for (int calls : {1, 2}) {
      CallFacts p = onePairCall(bytes);
      p.p2pCalls = calls;
      EXPECT_EQ(processCache.choose(p, config), pathOf(p, config))
          << "send " << bytes << " x" << calls;
    }
  }
}

TEST(DevicePathChoice, ProtoListExcludesPathsAndEnablesLlThreadsOnlyByName) {
  SelectionConfig config;
  ASSERT_TRUE(NameList::parse("^ll", names(), &config.proto));
  EXPECT_NE(chooseDevicePath(deviceCall(CollType::AllReduce, 1024), config).path, DevicePath::Ll);
  ASSERT_TRUE(NameList::parse("^ll,staged,host_sum", names(), &config.proto));
  EXPECT_EQ(chooseDevicePath(deviceCall(CollType::AllReduce, 1024), config).path,
            DevicePath::Proxy);
  // The proxy serves what nothing allowed does, even left out.
  ASSERT_TRUE(NameList::parse("ll", names(), &config.proto));
  EXPECT_EQ(chooseDevicePath(deviceCall(CollType::AlltoAll, 1024), config).path, DevicePath::Proxy);

  CallFacts threads = deviceCall(CollType::AllReduce, 1024);
  threads.threadRanks = true;
  config = withoutHostSum();
  EXPECT_FALSE(pathAllowed(config, DevicePath::LlThreads));
  EXPECT_EQ(chooseDevicePath(threads, config).path, DevicePath::Staged);
  ASSERT_TRUE(NameList::parse("ll_threads,staged,proxy", names(), &config.proto));
  EXPECT_TRUE(pathAllowed(config, DevicePath::LlThreads));
  EXPECT_EQ(chooseDevicePath(threads, config).path, DevicePath::LlThreads);
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

// Small sends and receives between processes take the LL pair slots where the
// ranks agreed on them, up to their size; larger ones, thread ranks, empty
// ones and LANES_PROTO=^ll_pairs keep the staged pair slots.
TEST(DevicePathChoice, SmallSendsAndReceivesTakeTheLlPairSlots) {
  SelectionConfig config;
  auto small = [](size_t bytes) {
    CallFacts f = onePairCall(bytes);
    f.llPairs = {true, 64 << 10};
    return f;
  };
  for (size_t bytes : {size_t{1}, size_t{8}, size_t{4} << 10, size_t{32} << 10})
    EXPECT_EQ(chooseDevicePath(small(bytes), config).path, DevicePath::LlPairs) << bytes;
  // Past the slots' size LL may not serve it at all.
  CallFacts past = small((64 << 10) + 1);
  ASSERT_TRUE(NameList::parse("ll_pairs,proxy", names(), &config.proto));
  EXPECT_EQ(chooseDevicePath(past, config).path, DevicePath::Proxy);
  CallFacts edge = small(64 << 10);
  EXPECT_EQ(chooseDevicePath(edge, config).path, DevicePath::LlPairs);
  config.proto = NameList();
  EXPECT_EQ(chooseDevicePath(small(0), config).path, DevicePath::Pairs);
  CallFacts threads = small(1024);
  threads.threadRanks = true;
  EXPECT_EQ(chooseDevicePath(threads, config).path, DevicePath::Pairs);
  CallFacts self = small(1024);
  self.p2pSelf = true;
  EXPECT_EQ(chooseDevicePath(self, config).path, DevicePath::Proxy);
  CallFacts hosts = small(1024);
  hosts.oneHost = false;
  EXPECT_EQ(chooseDevicePath(hosts, config).path, DevicePath::Proxy);
  CallFacts off = small(1024);
  off.llPairs.ready = false;
  EXPECT_EQ(chooseDevicePath(off, config).path, DevicePath::Pairs);
  // Priced: the staged pair slots' three hand-offs against LL's launch and two
  // round trips, LL's lines at the link's rate. As measured on the H200 (2
  // processes under MPS), LL wins at 32 KiB and the staged slots at 64 KiB.
  const std::vector<DeviceCandidate> ranked = rankDevicePaths(small(32 << 10), config);
  ASSERT_GE(ranked.size(), 2u);
  EXPECT_EQ(ranked[0].path, DevicePath::LlPairs);
  EXPECT_EQ(ranked[1].path, DevicePath::Pairs);
  EXPECT_EQ(rankDevicePaths(small(64 << 10), config).front().path, DevicePath::Pairs);
  ASSERT_TRUE(NameList::parse("^ll_pairs", names(), &config.proto));
  EXPECT_EQ(chooseDevicePath(small(1024), config).path, DevicePath::Pairs);
}

// Mid-size collectives between processes take the simple kernel where the
// ranks agreed on its slots, up to their size, where the cost model ranks it
// first; thread ranks, other hosts, batches, all-to-all and
// LANES_PROTO=^simple never.
TEST(DevicePathChoice, MidSizeCollectivesTakeTheSimpleKernel) {
  SelectionConfig config;
  auto mid = [](CollType coll, size_t bytes) {
    CallFacts f = deviceCall(coll, bytes);
    f.nranks = 2;
    f.ranksPerGpu = 2;  // two processes on one GPU under MPS, as measured on the H200
    f.simple = {true, size_t{4} << 20};
    return f;
  };
  constexpr size_t kMax = size_t{4} << 20;
  // Priced: LL's single round trip wins the smallest; the simple kernel's
  // chunks from there; the copy engines, whose two directions overlap, the
  // largest (as measured on the H200 with 2 processes under MPS, P2P off: at
  // 4 MiB the staged all-gather, reduce-scatter and broadcast took 0.67-0.93x
  // the simple kernel's time). A reduce has no staged path.
  for (CollType c : {CollType::AllReduce, CollType::AllGather, CollType::ReduceScatter,
                     CollType::Broadcast, CollType::Reduce}) {
    EXPECT_EQ(pathOf(mid(c, 8), config), DevicePath::Ll) << collTypeName(c);
    EXPECT_EQ(pathOf(mid(c, 128 << 10), config), DevicePath::Simple) << collTypeName(c);
  }
  for (CollType c :
       {CollType::AllReduce, CollType::AllGather, CollType::ReduceScatter, CollType::Broadcast})
    EXPECT_EQ(pathOf(mid(c, kMax), config), DevicePath::Staged) << collTypeName(c);
  EXPECT_EQ(pathOf(mid(CollType::Reduce, kMax), config), DevicePath::Simple);

  // Eligibility, whatever the costs: with only simple and the proxy allowed.
  SelectionConfig only;
  ASSERT_TRUE(NameList::parse("simple,proxy", names(), &only.proto));
  for (CollType c : {CollType::AllReduce, CollType::AllGather, CollType::ReduceScatter,
                     CollType::Broadcast, CollType::Reduce}) {
    EXPECT_EQ(pathOf(mid(c, kMax), only), DevicePath::Simple) << collTypeName(c);
    EXPECT_EQ(pathOf(mid(c, kMax + 32), only), DevicePath::Proxy) << collTypeName(c);
  }
  // A reduce-scatter posts its blocks 16-byte aligned: 2 blocks of 2 MiB - 8
  // fit 4 MiB, of 2 MiB + 8 do not.
  EXPECT_EQ(pathOf(mid(CollType::ReduceScatter, kMax - 16), only), DevicePath::Simple);
  EXPECT_EQ(pathOf(mid(CollType::ReduceScatter, kMax + 16), only), DevicePath::Proxy);
  CallFacts threads = mid(CollType::AllReduce, 1 << 20);
  threads.threadRanks = true;
  EXPECT_EQ(pathOf(threads, only), DevicePath::Proxy);
  CallFacts hosts = mid(CollType::AllReduce, 1 << 20);
  hosts.oneHost = false;
  EXPECT_EQ(pathOf(hosts, only), DevicePath::Proxy);
  CallFacts off = mid(CollType::AllReduce, 1 << 20);
  off.simple.ready = false;
  EXPECT_EQ(pathOf(off, only), DevicePath::Proxy);
  EXPECT_EQ(pathOf(mid(CollType::AlltoAll, 1 << 20), only), DevicePath::Proxy);
  CallFacts batch = mid(CollType::AllReduce, 1 << 20);
  batch.calls = 2;
  EXPECT_EQ(pathOf(batch, only), DevicePath::Proxy);
  ASSERT_TRUE(NameList::parse("^simple", names(), &config.proto));
  EXPECT_NE(pathOf(mid(CollType::AllReduce, 1 << 20), config), DevicePath::Simple);
}

// The simple kernel's slots: every rank sizes them alike from the agreed
// limit and the rank count, within the arena's budget, with a flag for every chunk.
TEST(SimpleSlots, SizedByTheBudgetAndTheRankCount) {
  constexpr size_t kMiB = size_t{1} << 20;
  EXPECT_EQ(cuda::simpleMaxBytesFor(2, 4 * kMiB), 4 * kMiB);
  EXPECT_EQ(cuda::simpleMaxBytesFor(8, 4 * kMiB), 4 * kMiB);
  EXPECT_EQ(cuda::simpleMaxBytesFor(16, 4 * kMiB), 2 * kMiB);
  EXPECT_EQ(cuda::simpleMaxBytesFor(64, 4 * kMiB), kMiB / 2);
  EXPECT_EQ(cuda::simpleMaxBytesFor(2, 16 * kMiB), 16 * kMiB);
  EXPECT_EQ(cuda::simpleMaxBytesFor(2, 4 * kMiB + 100), 4 * kMiB);  // whole pages
  EXPECT_EQ(cuda::simpleMaxBytesFor(2, 32 << 10), 0u);              // below 64 KiB: none
  for (int n : {2, 3, 8, 16, 64}) {
    const size_t max = cuda::simpleMaxBytesFor(n, 4 * kMiB);
    EXPECT_LE(2 * static_cast<size_t>(n) * cuda::simpleSlotBytes(max, n), cuda::kSimpleRegionBudget)
        << n;
    // The most flags a call can need fit the flag words: a partial chunk per
    // reduce-scatter block.
    const size_t flags = n * ((max / n + cuda::kSimpleChunkBytes - 1) / cuda::kSimpleChunkBytes);
    EXPECT_LE(flags * 8, cuda::simpleFlagBytes(max, n)) << n;
  }
  EXPECT_EQ(cuda::simplePostedBytes(cuda::LlCollective::ReduceScatter, 17, 3), 3u * 32);
  EXPECT_EQ(cuda::simplePostedBytes(cuda::LlCollective::AllReduce, 17, 3), 17u);
}

TEST(PlanName, NamesThePathAndTheProxysAlgorithm) {
  const SelectionConfig config;
  EXPECT_EQ(planName(deviceCall(CollType::AllReduce, 8), config), "ll");
  EXPECT_EQ(planName(deviceCall(CollType::Broadcast, 1 << 20), config), "staged");
  EXPECT_EQ(planName(deviceCall(CollType::Reduce, 1 << 20), config), "proxy/chain");
  CallFacts host = deviceCall(CollType::AllReduce, 64 << 20);
  host.device = false;
  EXPECT_EQ(planName(host, config), "shared_sum");
  SelectionConfig noArena = config;
  noArena.sharedSumUsable = false;
  EXPECT_EQ(planName(host, noArena), "ring");
}

TEST(SelectionConfig, AlgoListTakesTheAliasesLanesAlgoAlwaysTook) {
  ::setenv("LANES_ALGO", "^RD, chain, Tree, shared_sum", 1);
  const SelectionConfig c = SelectionConfig::fromEnv();
  ::unsetenv("LANES_ALGO");
  ASSERT_TRUE(c.algo.set());
  EXPECT_FALSE(c.algo.allows("recursive_doubling", true));
  EXPECT_FALSE(c.algo.allows("chain", true));
  EXPECT_FALSE(c.algo.allows("shared_sum", true));
  EXPECT_TRUE(c.algo.allows("ring", true));
  EXPECT_EQ(chooseHostAlgorithm(CollType::AllReduce, 8, 4, c).algo, AlgoId::Ring);
}

TEST(SelectionConfig, BadListsWarnAndKeepTheDefaults) {
  ::setenv("LANES_PROTO", "ll,nvls", 1);
  ::setenv("LANES_ALGO", "^butterfly", 1);
  const SelectionConfig c = SelectionConfig::fromEnv();
  ::unsetenv("LANES_PROTO");
  ::unsetenv("LANES_ALGO");
  EXPECT_FALSE(c.proto.set());
  EXPECT_FALSE(c.algo.set());
  EXPECT_TRUE(pathAllowed(c, DevicePath::Staged));
}

}  // namespace
}  // namespace lanes
