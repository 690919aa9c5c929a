// The host algorithms' cost model (planner/host_costs.h) and the choice it
// drives: which algorithm wins where, how the crossover follows the measured
// figures, and the explanation the PLAN log and lanes-topo print.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "algorithms/tree.h"
#include "planner/host_costs.h"
#include "planner/machine_facts.h"
#include "planner/plan_cache.h"
#include "planner/registry.h"

namespace lanes {
namespace {

CallFacts call(CollType coll, size_t bytes, int nranks) {
  CallFacts f;
  f.coll = coll;
  f.bytes = bytes;
  f.nranks = nranks;
  return f;
}

// A machine with room for every rank: 8 cores. Host summation's arena is
// left out: these tests are about the transports' algorithms (its own
// choice is tested below).
SelectionConfig roomy() {
  SelectionConfig c;
  c.machine.cores = 8;
  c.sharedSumUsable = false;
  return c;
}

AlgoId choice(CollType coll, size_t bytes, int nranks, const SelectionConfig& c = roomy()) {
  return chooseHostAlgorithm(call(coll, bytes, nranks), c).algo;
}

// The smallest power-of-two size at which the ring beats recursive doubling.
size_t allReduceCrossover(const SelectionConfig& c, int nranks) {
  for (size_t s = 8; s <= (size_t{1} << 30); s *= 2)
    if (choice(CollType::AllReduce, s, nranks, c) == AlgoId::Ring) return s;
  return 0;
}

TEST(HostCosts, LatencyDecidesSmallCallsAndBytesLargeOnes) {
  const MachineFacts m = roomy().machine;
  const CostTerms small = hostAlgoCost(AlgoId::Ring, call(CollType::AllReduce, 8, 4), m);
  EXPECT_GT(small.latency, 0.9 * small.total());
  EXPECT_EQ(small.deciding().rfind("latency", 0), 0u) << small.deciding();
  const CostTerms large = hostAlgoCost(AlgoId::Ring, call(CollType::AllReduce, 256 << 20, 4), m);
  EXPECT_GT(large.transfer + large.reduce, 0.9 * large.total());
  EXPECT_EQ(large.deciding().rfind("latency", 0), std::string::npos) << large.deciding();
  // Nothing to move costs nothing; one rank moves nothing.
  EXPECT_EQ(hostAlgoCost(AlgoId::Ring, call(CollType::AllReduce, 0, 4), m).total(), 0);
  EXPECT_EQ(hostAlgoCost(AlgoId::Ring, call(CollType::AllReduce, 1 << 20, 1), m).total(), 0);
}

// At size the ring wins: it reduces a segment a step where recursive
// doubling reduces the whole buffer every round.
TEST(HostCosts, TheRingReducesLessThanRecursiveDoublingAtSize) {
  const MachineFacts m = roomy().machine;
  for (int n : {4, 8}) {
    const CallFacts f = call(CollType::AllReduce, 64 << 20, n);
    const CostTerms ring = hostAlgoCost(AlgoId::Ring, f, m);
    const CostTerms doubling = hostAlgoCost(AlgoId::RecursiveDoubling, f, m);
    EXPECT_LT(ring.reduce, doubling.reduce / 2) << n << " ranks";
    EXPECT_LT(ring.total(), doubling.total()) << n << " ranks";
  }
  // Ranks beyond a power of two cost recursive doubling two more rounds.
  const double five =
      hostAlgoCost(AlgoId::RecursiveDoubling, call(CollType::AllReduce, 8, 5), m).latency;
  const double four =
      hostAlgoCost(AlgoId::RecursiveDoubling, call(CollType::AllReduce, 8, 4), m).latency;
  EXPECT_NEAR(five - four, 2 * m.hopLatencyUs * 1e-6, 1e-9);
}

// The double tree's all-reduce moves half the buffer each way over each tree
// edge of its busiest rank: two ranks are a root and a leaf of the two trees
// (two edges, the buffer once each way, as the ring's two steps), four ranks
// have a rank inner in one tree and a leaf in the other (four edges). Beyond
// two ranks that rank's one core also does its copies one after another: at
// four and eight ranks it sends its half up and down both trees and copies
// the halves coming down (six half-buffers) and reduces two children's.
TEST(HostCosts, TheTreeMovesTheBytesOfItsBusiestRanksEdges) {
  EXPECT_EQ(algo::treeDepth(CollType::AllReduce, 2).links, 2);
  EXPECT_EQ(algo::treeDepth(CollType::AllReduce, 3).links, 3);
  EXPECT_EQ(algo::treeDepth(CollType::AllReduce, 4).links, 4);
  EXPECT_EQ(algo::treeDepth(CollType::AllReduce, 8).links, 4);
  for (int n : {4, 8}) {
    EXPECT_EQ(algo::treeDepth(CollType::AllReduce, n).copies, 6) << n << " ranks";
    EXPECT_EQ(algo::treeDepth(CollType::AllReduce, n).reduces, 2) << n << " ranks";
  }
  // No memory bound, so both rank counts move their bytes at one rate.
  MachineFacts m = roomy().machine;
  m.memGBs = m.exchangeGBs = 1e3;
  const double s = 256 << 20;
  const CallFacts two = call(CollType::AllReduce, 256 << 20, 2);
  const CallFacts four = call(CollType::AllReduce, 256 << 20, 4);
  // Two ranks move what the ring's two steps do, but in 16 chunks of a
  // sixteenth of the buffer through 17 steps.
  const double treeTwo = hostAlgoCost(AlgoId::Tree, two, m).transfer;
  EXPECT_NEAR(treeTwo, 17.0 / 16 * hostAlgoCost(AlgoId::Ring, two, m).transfer, 1e-9 * treeTwo);
  // Four ranks' busiest core copies three buffers and reduces one, each at a
  // hop's rate at the working set (more than its edges' or steps' hops).
  const double rate = rateAt(m.hopGBs, 4 * s) * 1e9;
  const CostTerms treeFour = hostAlgoCost(AlgoId::Tree, four, m);
  EXPECT_NEAR(treeFour.transfer, 3 * s / rate, 1e-9 * treeFour.transfer);
  EXPECT_GE(treeFour.reduce, s / rate * (1 - 1e-9));
  EXPECT_GT(treeFour.transfer, 2 * 16.0 / 17 * treeTwo);
}

// Beyond the caches the hop rate falls smoothly to the bound of hops moving
// at once: a larger working set never moves its bytes faster, and it falls
// between 2 MiB and 256 MiB of working set, not in one step. (From hops of
// 256 KiB, where the curve peaks: below, a ring's hop costs at least the
// curve at its own size, see below.)
TEST(HostCosts, TheHopRateFallsSmoothlyPastTheCaches) {
  MachineFacts m = roomy().machine;
  m.exchangeGBs = 2;  // a third of the curve's last rate, as measured (3.2-5.6 against 6-24)
  double last = 0;
  double steepest = 0;
  for (size_t s = 256 << 10; s <= (size_t{1} << 30); s *= 2) {
    const double perByte = hostAlgoCost(AlgoId::Ring, call(CollType::AllGather, s, 2), m).transfer /
                           static_cast<double>(s);
    if (last > 0) {
      EXPECT_GE(perByte, last * 0.999) << s;
      steepest = std::max(steepest, perByte / last);
    }
    last = perByte;
  }
  EXPECT_LT(steepest, 1.5) << "a doubling of the size costs at most half as much again a byte";
  // Its ends: the curve up to 2 MiB of working set (two ranks' outputs of
  // twice the piece), the bound from 256 MiB. A ring all-gather of two ranks
  // moves one hop of the piece and copies its own (half a hop).
  auto perByteAt = [&](size_t piece) {
    return hostAlgoCost(AlgoId::Ring, call(CollType::AllGather, piece, 2), m).transfer /
           static_cast<double>(piece);
  };
  EXPECT_NEAR(perByteAt(512 << 10), 1.5 / (rateAt(m.hopGBs, 4.0 * (512 << 10)) * 1e9), 1e-18);
  EXPECT_NEAR(perByteAt(64 << 20), 1.5 / (m.exchangeGBs * 1e9), 1e-18);
}

// A ring, recursive doubling or the tree's all-reduce beyond two ranks waits
// for each step's hops before the next: where every rank has a core, a hop
// costs at least the curve at its own size, though the working set (the
// ranks' buffers together) reads a faster point of it. A chain pipelines its
// chunks and keeps the working set's rate.
TEST(HostCosts, AWholeStepsHopCostsAtLeastTheCurveAtItsOwnSize) {
  const MachineFacts m = roomy().machine;  // hops: 2 GB/s at 4 KiB, 10 at 256 KiB
  const size_t s = 32 << 10;
  const int n = 8;
  const double hop = double(s) / n;  // 4 KiB, working set 256 KiB
  const CostTerms ring = hostAlgoCost(AlgoId::Ring, call(CollType::AllReduce, s, n), m);
  // Seven reduced hops (half a hop each) and seven whole ones.
  const double atItsSize = 7 * 1.5 * hop / (rateAt(m.hopGBs, hop) * 1e9);
  EXPECT_NEAR(ring.transfer, atItsSize, atItsSize * 1e-9);
  const CostTerms rd = hostAlgoCost(AlgoId::RecursiveDoubling, call(CollType::AllReduce, s, n), m);
  const double rdAtItsSize = 3 * 0.5 * double(s) / (rateAt(m.hopGBs, double(s)) * 1e9);
  EXPECT_NEAR(rd.transfer, rdAtItsSize, rdAtItsSize * 1e-9);
  // Ranks sharing cores keep the working set's rate, as the chain does.
  MachineFacts crowded = m;
  crowded.cores = 2;
  const CostTerms shared = hostAlgoCost(AlgoId::Ring, call(CollType::AllReduce, s, n), crowded);
  const double atWorkingSet = 7 * 1.5 * hop / (rateAt(m.hopGBs, double(s) * n) * 1e9 * 0.25);
  EXPECT_NEAR(shared.transfer, atWorkingSet, atWorkingSet * 1e-9);
  // The tree's all-reduce beyond two ranks: its inner nodes take both
  // children's chunks each step (here one chunk a half, 16 KiB: hops of 32 KiB
  // in both trees at once); a two-rank tree keeps the working set's rate.
  auto treeTransfer = [&](int ranks, bool atHopSize) {
    const algo::TreeDepth d = algo::treeDepth(CollType::AllReduce, ranks);
    const double hopBytes = double(s), linkBytes = d.links * double(s) / 2;
    auto rate = [&](double bytes) {
      return rateAt(m.hopGBs, atHopSize ? std::min(bytes, double(s) * ranks)
                                        : std::max(bytes, double(s) * ranks)) *
             1e9;
    };
    return 0.75 *
           std::max((d.up + d.down) * hopBytes / rate(hopBytes), linkBytes / rate(linkBytes));
  };
  ASSERT_EQ(algo::treeChunks(s), 1);
  const double tree8 = hostAlgoCost(AlgoId::Tree, call(CollType::AllReduce, s, 8), m).transfer;
  EXPECT_NEAR(tree8, treeTransfer(8, true), treeTransfer(8, true) * 1e-9);
  EXPECT_GT(tree8, 1.2 * treeTransfer(8, false));
  const double tree2 = hostAlgoCost(AlgoId::Tree, call(CollType::AllReduce, s, 2), m).transfer;
  EXPECT_NEAR(tree2, treeTransfer(2, false), treeTransfer(2, false) * 1e-9);
  const double piece = 4 << 10;
  const CostTerms chain = hostAlgoCost(AlgoId::Chain, call(CollType::Broadcast, piece, 4), m);
  const double chainRate = rateAt(m.hopGBs, piece * 4) * 1e9;
  EXPECT_NEAR(chain.transfer, 1.25 * piece / chainRate, 1e-15);
}

// Host summation copies the input in and the result out on the rank's own
// core, one after the other, each at a hop's rate; in the caches that is
// twice a hop of the buffer, where a ring step's send and receive run on two
// cores at once. The rate is read at twice the ranks' buffers: every input
// byte also passes through the arena.
TEST(HostCosts, HostSummationsCopiesRunOneAfterTheOther) {
  const MachineFacts m = roomy().machine;
  const CallFacts f = call(CollType::AllReduce, 64 << 10, 2);
  const double workingSet = 2 * 2.0 * (64 << 10);
  const double copies = 2.0 * (64 << 10) / (rateAt(m.hopGBs, workingSet) * 1e9);
  EXPECT_NEAR(hostAlgoCost(AlgoId::SharedSum, f, m).transfer, copies, copies * 1e-9);
}

// Host summation's latency: where the probe timed its two-rank loop and every
// rank has a core, that loop's call at any rank count; else the call and two
// later steps.
TEST(HostCosts, HostSummationsLatencyIsTheProbesLoopAtAnyRankCount) {
  MachineFacts m = roomy().machine;
  m.callUs = 0.5;
  m.stepUs = 0.25;
  auto latency = [&](int n) {
    return hostAlgoCost(AlgoId::SharedSum, call(CollType::AllReduce, 8, n), m).latency;
  };
  EXPECT_NEAR(latency(2), (0.5 + 2 * 0.25) * 1e-6, 1e-15) << "not probed";
  EXPECT_NEAR(latency(8), latency(2), 1e-15) << "not probed: the same at any rank count";
  m.sumUs = 3;
  EXPECT_NEAR(latency(2), 3e-6, 1e-15);
  EXPECT_NEAR(latency(8), 3e-6, 1e-15);
  EXPECT_NEAR(m.sumCallUs(), 3, 0);
  // Ranks beyond the cores wait for each other's turns: the probe's two ranks
  // had a core each, so its loop does not price them.
  m.cores = 2;
  const double crowded = latency(4);
  m.sumUs = 0;
  EXPECT_NEAR(crowded, latency(4), 1e-15);
  EXPECT_NEAR(m.sumCallUs(), 0.5 + 2 * 0.25, 1e-12);
}

TEST(HostAlgorithmChoice, RecursiveDoublingSmallRingLargeAndTheOnlyServerElsewhere) {
  for (int n : {2, 4, 8}) {
    EXPECT_EQ(choice(CollType::AllReduce, 8, n), AlgoId::RecursiveDoubling) << n;
    EXPECT_EQ(choice(CollType::AllReduce, 256 << 20, n), AlgoId::Ring) << n;
  }
  EXPECT_EQ(choice(CollType::AllGather, 8, 4), AlgoId::RecursiveDoubling);
  EXPECT_EQ(choice(CollType::AllGather, 8, 3), AlgoId::Ring);  // not a power of two
  EXPECT_EQ(choice(CollType::ReduceScatter, 8, 4), AlgoId::Ring);
  EXPECT_EQ(choice(CollType::AlltoAll, 1 << 20, 4), AlgoId::Pairwise);
  EXPECT_EQ(choice(CollType::Gather, 1 << 20, 4), AlgoId::Direct);
  EXPECT_EQ(choice(CollType::Scatter, 1 << 20, 4), AlgoId::Direct);
  // A chain's middle rank moves a buffer once, a direct root once per rank.
  EXPECT_EQ(choice(CollType::Broadcast, 64 << 20, 8), AlgoId::Chain);
  EXPECT_EQ(choice(CollType::Reduce, 64 << 20, 8), AlgoId::Chain);
}

TEST(HostAlgorithmChoice, TheCrossoverFollowsTheMeasuredHopAndStep) {
  // The hop and the later steps the probe times with it: the ring has
  // 2(N - 1) of those, recursive doubling log2 N.
  SelectionConfig fast = roomy(), slow = roomy();
  fast.machine.hopLatencyUs = fast.machine.stepUs = 0.5;
  slow.machine.hopLatencyUs = slow.machine.stepUs = 20;
  const size_t early = allReduceCrossover(fast, 8), late = allReduceCrossover(slow, 8);
  ASSERT_GT(early, 0u);
  ASSERT_GT(late, 0u);
  EXPECT_LT(early, late);
}

// 8 ranks on 2 cores: a rank runs a quarter of the time, so its call costs
// four times as much, and three hops in four wait for the peer's turn on a
// core.
TEST(HostAlgorithmChoice, TimeSharedCoresMakeHopsDearer) {
  SelectionConfig crowded = roomy();
  crowded.machine.cores = 2;
  const MachineFacts& m = crowded.machine;
  const CallFacts f = call(CollType::AllReduce, 8, 8);
  const double hops = 2 * 7;  // the ring's
  EXPECT_NEAR(hostAlgoCost(AlgoId::Ring, f, m).latency,
              (4 * m.callUs + hops * (0.25 * m.hopLatencyUs + 0.75 * kUnscheduledPeerHopUs)) * 1e-6,
              1e-12);
  // With a core per rank a hop costs the hop latency.
  EXPECT_NEAR(hostAlgoCost(AlgoId::Ring, f, roomy().machine).latency,
              (m.callUs + hops * m.hopLatencyUs) * 1e-6, 1e-12);
  // A hop slower than a peer's wake-up (between hosts) is never made cheaper.
  SelectionConfig slowHops = crowded;
  slowHops.machine.hopLatencyUs = 2 * kUnscheduledPeerHopUs;
  EXPECT_NEAR(hostAlgoCost(AlgoId::Ring, f, slowHops.machine).latency,
              (4 * m.callUs + hops * slowHops.machine.hopLatencyUs) * 1e-6, 1e-12);
}

// Within a call the ranks are in step after its first hop: the later steps
// cost the probe's step, where each rank has a core on one host. Time-shared
// cores or a link between packages keep every step a whole hop.
TEST(HostCosts, AStepAfterTheFirstCostsTheMeasuredStep) {
  SelectionConfig c = roomy();
  c.machine.hopLatencyUs = 2;
  c.machine.stepUs = 0.5;
  const MachineFacts& m = c.machine;
  const CallFacts ring4 = call(CollType::AllReduce, 8, 4);
  EXPECT_NEAR(hostAlgoCost(AlgoId::Ring, ring4, m).latency,
              (m.callUs + m.hopLatencyUs + 5 * m.stepUs) * 1e-6, 1e-12);
  EXPECT_NEAR(hostAlgoCost(AlgoId::RecursiveDoubling, ring4, m).latency,
              (m.callUs + m.hopLatencyUs + m.stepUs) * 1e-6, 1e-12);
  // One step: the hop alone.
  EXPECT_NEAR(hostAlgoCost(AlgoId::RecursiveDoubling, call(CollType::AllReduce, 8, 2), m).latency,
              (m.callUs + m.hopLatencyUs) * 1e-6, 1e-12);
  // A step is never dearer than the hop.
  SelectionConfig odd = c;
  odd.machine.stepUs = 5;
  EXPECT_NEAR(hostAlgoCost(AlgoId::Ring, ring4, odd.machine).latency,
              (m.callUs + 6 * m.hopLatencyUs) * 1e-6, 1e-12);
  // Time-shared: every step may wait for a peer's turn.
  SelectionConfig crowded = c;
  crowded.machine.cores = 2;
  const double shared = hostAlgoCost(AlgoId::Ring, ring4, crowded.machine).latency;
  SelectionConfig crowdedNoStep = crowded;
  crowdedNoStep.machine.stepUs = crowded.machine.hopLatencyUs;
  EXPECT_NEAR(shared, hostAlgoCost(AlgoId::Ring, ring4, crowdedNoStep.machine).latency, 1e-12);
  // Across packages every step crosses the link.
  SelectionConfig split = c;
  split.machine.packages = 2;
  SelectionConfig splitNoStep = split;
  splitNoStep.machine.stepUs = split.machine.hopLatencyUs;
  EXPECT_NEAR(hostAlgoCost(AlgoId::Ring, ring4, split.machine).latency,
              hostAlgoCost(AlgoId::Ring, ring4, splitNoStep.machine).latency, 1e-12);
}

// A loop of rooted calls runs at its busiest rank's pace, and the others,
// waiting most of the time, leave it a core: no time-sharing price.
TEST(HostAlgorithmChoice, RootedCallsAreNotTimeShared) {
  SelectionConfig crowded = roomy();
  crowded.machine.cores = 2;
  for (CollType coll : {CollType::Broadcast, CollType::Reduce, CollType::Gather}) {
    const CallFacts f = call(coll, 1 << 20, 4);
    EXPECT_NEAR(hostAlgoCost(AlgoId::Direct, f, crowded.machine).total(),
                hostAlgoCost(AlgoId::Direct, f, roomy().machine).total(), 1e-15)
        << collTypeName(coll);
  }
  // An all-gather's ranks wait for each other at every step: time-shared.
  const CallFacts all = call(CollType::AllGather, 8, 4);
  EXPECT_GT(hostAlgoCost(AlgoId::Ring, all, crowded.machine).total(),
            1.5 * hostAlgoCost(AlgoId::Ring, all, roomy().machine).total());
}

// With the probe's rooted call R, a loop of direct rooted calls costs R at any
// rank count; a chain of more than two ranks R/8 more where each rank has a
// core, else R/4 more per rank beyond the cores; the double tree R and R/2 per
// level of its depth, and R/4 more per rank beyond the cores. Calls across
// hosts or CPU packages keep the call and a hop. Unmeasured, every rooted
// call costs the call and a hop.
TEST(HostCosts, RootedCallsCostTheProbesRootedCall) {
  SelectionConfig c = roomy();
  MachineFacts& m = c.machine;
  m.callUs = 0.5;
  m.hopLatencyUs = 2.5;
  m.stepUs = 0.25;
  auto latency = [&](AlgoId algo, CollType coll, int n) {
    return hostAlgoCost(algo, call(coll, 8, n), m).latency * 1e6;
  };
  EXPECT_NEAR(latency(AlgoId::Direct, CollType::Broadcast, 4), 3.0, 1e-9) << "unmeasured";
  EXPECT_NEAR(latency(AlgoId::Chain, CollType::Reduce, 4), 3.0, 1e-9) << "unmeasured";
  EXPECT_EQ(m.rootedCallUs(), 3.0);
  m.rootedUs = 1.5;
  EXPECT_EQ(m.rootedCallUs(), 1.5);
  for (CollType coll :
       {CollType::Broadcast, CollType::Reduce, CollType::Gather, CollType::Scatter}) {
    for (int n : {2, 3, 8})
      EXPECT_NEAR(latency(AlgoId::Direct, coll, n), 1.5, 1e-9) << collTypeName(coll) << n;
  }
  for (CollType coll : {CollType::Broadcast, CollType::Reduce}) {
    EXPECT_NEAR(latency(AlgoId::Chain, coll, 2), 1.5, 1e-9) << collTypeName(coll);
    EXPECT_NEAR(latency(AlgoId::Chain, coll, 5), 1.5 * 1.125, 1e-9) << collTypeName(coll);
    EXPECT_NEAR(latency(AlgoId::Chain, coll, 8), 1.5 * 1.125, 1e-9) << collTypeName(coll);
    EXPECT_NEAR(latency(AlgoId::Tree, coll, 2), 1.5 * 1.5, 1e-9) << collTypeName(coll);
    EXPECT_NEAR(latency(AlgoId::Tree, coll, 3), 1.5 * 2, 1e-9) << collTypeName(coll);
    EXPECT_NEAR(latency(AlgoId::Tree, coll, 4), 1.5 * 2, 1e-9) << collTypeName(coll);
    EXPECT_NEAR(latency(AlgoId::Tree, coll, 5), 1.5 * 2.5, 1e-9) << collTypeName(coll);
    EXPECT_NEAR(latency(AlgoId::Tree, coll, 8), 1.5 * 2.5, 1e-9) << collTypeName(coll);
  }
  // Ranks beyond the cores wait for their turns: a quarter of R each, still
  // not divided by a core share.
  m.cores = 2;
  EXPECT_NEAR(latency(AlgoId::Chain, CollType::Broadcast, 2), 1.5, 1e-9);
  EXPECT_NEAR(latency(AlgoId::Chain, CollType::Broadcast, 3), 1.5 * 1.25, 1e-9);
  EXPECT_NEAR(latency(AlgoId::Chain, CollType::Broadcast, 4), 1.5 * 1.5, 1e-9);
  EXPECT_NEAR(latency(AlgoId::Tree, CollType::Reduce, 4), 1.5 * 2.5, 1e-9);
  EXPECT_NEAR(latency(AlgoId::Direct, CollType::Broadcast, 4), 1.5, 1e-9);
  m.cores = 8;
  // Not rooted: unchanged.
  const double ring = latency(AlgoId::Ring, CollType::AllReduce, 4);
  m.rootedUs = 0;
  EXPECT_EQ(latency(AlgoId::Ring, CollType::AllReduce, 4), ring);
  m.rootedUs = 1.5;
  // Across CPU packages or hosts: the call and a hop there (unmeasured, twice
  // the hop across packages; the socket's latency across hosts).
  m.packages = 2;
  EXPECT_NEAR(latency(AlgoId::Direct, CollType::Broadcast, 4), 0.5 + 2 * 2.5, 1e-9);
  m.packages = 1;
  m.hosts = 2;
  EXPECT_NEAR(latency(AlgoId::Direct, CollType::Broadcast, 4), 0.5 + m.socketLatencyUs, 1e-9);
}

// A rooted broadcast's bytes, as its ranks overlap them on one host: a chain's
// middle rank forwards each chunk as it arrives (a quarter of a hop more than
// one hop), a tree's inner node sends to two children (two hops); a direct
// root copies into each rank's ring one copy after another on its core,
// bounded too by the memory all its copies read and write once out of the
// caches, and by one hop (two ranks: the hop). Across hosts, k hops and two.
TEST(HostCosts, RootedBroadcastsMoveTheirBytesAsTheirRanksOverlap) {
  MachineFacts m = roomy().machine;
  const size_t s = size_t{64} << 20;
  auto transfer = [&](AlgoId algo, int n) {
    return hostAlgoCost(algo, call(CollType::Broadcast, s, n), m).transfer;
  };
  for (int n : {3, 4, 8})
    EXPECT_NEAR(transfer(AlgoId::Chain, n) / transfer(AlgoId::Tree, n), 1.25 / 2, 1e-12) << n;
  EXPECT_NEAR(transfer(AlgoId::Direct, 2), transfer(AlgoId::Chain, 2), 1e-15);
  const double bytes = static_cast<double>(s);
  m.memGBs = 1000;  // the root's copies bound it, at the hop curve's last rate
  EXPECT_NEAR(transfer(AlgoId::Direct, 4), 3 * bytes / (m.hopGBs[7] * 1e9), 1e-12);
  m.memGBs = 1;  // the memory its three copies read and write
  EXPECT_NEAR(transfer(AlgoId::Direct, 4), 2 * 3 * bytes / 1e9, 1e-12);
  // Within the caches that memory does not bound it: never above k hops (the
  // chain's 1.25 hops of the same ranks).
  for (size_t small : {size_t{32} << 10, size_t{512} << 10}) {
    const CallFacts f = call(CollType::Broadcast, small, 4);
    EXPECT_LE(hostAlgoCost(AlgoId::Direct, f, m).transfer,
              3 / 1.25 * hostAlgoCost(AlgoId::Chain, f, m).transfer)
        << small;
  }
  m.memGBs = 12;
  m.hosts = 2;
  m.ranksPerHost = 2;
  const double hop = hostAlgoCost(AlgoId::Direct, call(CollType::Broadcast, s, 2), m).transfer;
  EXPECT_NEAR(transfer(AlgoId::Direct, 4), 3 * hop, 1e-12);
  EXPECT_NEAR(transfer(AlgoId::Chain, 4), 2 * hop, 1e-12);
}

// The choices those prices make: a small rooted call goes direct (the tree's
// 1.5 rooted calls never win it), a large 8-rank one to the chain, and a
// two-rank tie between direct and the chain to direct, measured or not.
TEST(HostAlgorithmChoice, SmallRootedCallsGoDirectAndTwoRankTiesToo) {
  SelectionConfig c = roomy();
  EXPECT_EQ(choice(CollType::Broadcast, 8, 2, c), AlgoId::Direct) << "unmeasured tie";
  EXPECT_EQ(choice(CollType::Reduce, 8, 2, c), AlgoId::Direct) << "unmeasured tie";
  c.machine.rootedUs = 1.5;
  for (int n : {2, 3, 4, 8}) {
    EXPECT_EQ(choice(CollType::Broadcast, 8, n, c), AlgoId::Direct) << n;
    EXPECT_EQ(choice(CollType::Reduce, 8, n, c), AlgoId::Direct) << n;
  }
  EXPECT_EQ(choice(CollType::Broadcast, 64 << 20, 8, c), AlgoId::Chain);
}

TEST(HostAlgorithmChoice, HostsBeyondOneCostSocketHops) {
  SelectionConfig two = roomy();
  two.machine.hosts = 2;
  const CallFacts f = call(CollType::AllReduce, 8, 4);
  EXPECT_GT(hostAlgoCost(AlgoId::Ring, f, two.machine).latency,
            hostAlgoCost(AlgoId::Ring, f, roomy().machine).latency * 5);
}

// Two ranks on two hosts: the ring's reduced half goes back in pieces, a
// socket ring's worth of it not overlapping the first half, so recursive
// doubling (one whole-buffer exchange, the same bytes) takes the all-reduces
// of 1-4 MiB, the tree (pipelined both ways) 16 MiB, and the ring the
// largest, where that window is a small share. Four ranks across hosts keep
// the ring's price.
TEST(HostAlgorithmChoice, TwoRanksOnTwoHostsExchangeWholeBuffers) {
  SelectionConfig two = roomy();
  two.machine.hosts = 2;
  two.machine.ranksPerHost = 1;
  two.machine.socketLatencyUs = 17;  // the VM's loopback probe
  two.machine.socketGBs = 3.9;
  for (size_t mib : {1, 4})
    EXPECT_EQ(choice(CollType::AllReduce, mib << 20, 2, two), AlgoId::RecursiveDoubling) << mib;
  EXPECT_EQ(choice(CollType::AllReduce, size_t{16} << 20, 2, two), AlgoId::Tree);
  for (size_t mib : {64, 256})
    EXPECT_EQ(choice(CollType::AllReduce, mib << 20, 2, two), AlgoId::Ring) << mib;
  const double socketRate = two.machine.socketGBs * 1e9;
  auto ringTransfer = [](const SelectionConfig& c, size_t bytes, int n) {
    return hostAlgoCost(AlgoId::Ring, call(CollType::AllReduce, bytes, n), c.machine).transfer;
  };
  // The window: half the buffer up to 4 MiB, 4 MiB beyond.
  const double oneMiB = 1 << 20;
  EXPECT_NEAR(ringTransfer(two, 1 << 20, 2), 1.5 * oneMiB / socketRate, 1e-12);
  EXPECT_NEAR(ringTransfer(two, 64 << 20, 2), (64 + 4) * oneMiB / socketRate, 1e-12);
  SelectionConfig four = two;
  four.machine.ranksPerHost = 2;
  EXPECT_NEAR(ringTransfer(four, 4 << 20, 4), 1.5 * 4 * oneMiB / socketRate, 1e-12);
}

// Halving-doubling: the ring's bytes in 2 log2(p) hops, so between hosts,
// where every hop is a socket's, it takes the all-reduces past recursive
// doubling's sizes from four ranks on (two ranks keep their measured
// choices, above). On one host it runs only where LANES_ALGO names it.
TEST(HostAlgorithmChoice, HalvingDoublingTakesManyHostsAllReducesAndRunsOnOneOnlyIfNamed) {
  SelectionConfig hosts = roomy();
  hosts.machine.hosts = 4;
  hosts.machine.ranksPerHost = 1;
  hosts.machine.socketLatencyUs = 17;
  hosts.machine.socketGBs = 3.9;
  for (size_t mib : {1, 16, 256})
    EXPECT_EQ(choice(CollType::AllReduce, mib << 20, 4, hosts), AlgoId::HalvingDoubling) << mib;
  EXPECT_EQ(choice(CollType::AllReduce, 8, 4, hosts), AlgoId::RecursiveDoubling);
  const CallFacts f = call(CollType::AllReduce, 1 << 20, 4);
  const CostTerms hd = hostAlgoCost(AlgoId::HalvingDoubling, f, hosts.machine);
  const CostTerms ring = hostAlgoCost(AlgoId::Ring, f, hosts.machine);
  EXPECT_NEAR(hd.transfer, ring.transfer, 1e-12);  // the same bytes
  EXPECT_LT(hd.latency, ring.latency);             // 4 hops against 6
  // Five ranks fold the fifth in and out: two more hops of the whole buffer.
  EXPECT_GT(
      hostAlgoCost(AlgoId::HalvingDoubling, call(CollType::AllReduce, 1 << 20, 5), hosts.machine)
          .transfer,
      hd.transfer + 1.9 * (1 << 20) / (hosts.machine.socketGBs * 1e9));

  // Not a default for reduce-scatters, nor where LANES_WIRE has the ring compress.
  EXPECT_NE(choice(CollType::ReduceScatter, size_t{16} << 20, 4, hosts), AlgoId::HalvingDoubling);
  SelectionConfig wire = hosts;
  wire.wire = WireFormat::Bf16;
  EXPECT_EQ(choice(CollType::AllReduce, size_t{16} << 20, 4, wire), AlgoId::Ring);

  SelectionConfig one = roomy();
  auto ranked = [](const SelectionConfig& c) {
    std::vector<AlgoId> algos;
    for (const HostCandidate& h :
         rankHostAlgorithms(call(CollType::AllReduce, size_t{64} << 20, 8), c))
      algos.push_back(h.algo);
    return algos;
  };
  const std::vector<AlgoId> oneHost = ranked(one);
  EXPECT_EQ(std::count(oneHost.begin(), oneHost.end(), AlgoId::HalvingDoubling), 0);
  EXPECT_EQ(std::count(oneHost.begin(), oneHost.end(), AlgoId::Ring), 1);
  ASSERT_TRUE(
      NameList::parse("^ring", {"ring", "recursive_doubling", "halving_doubling"}, &one.algo)
          .isOk());
  EXPECT_NE(choice(CollType::AllReduce, size_t{64} << 20, 8, one), AlgoId::HalvingDoubling);
  ASSERT_TRUE(NameList::parse("halving_doubling",
                              {"ring", "recursive_doubling", "halving_doubling"}, &one.algo)
                  .isOk());
  EXPECT_EQ(choice(CollType::AllReduce, size_t{64} << 20, 8, one), AlgoId::HalvingDoubling);
  EXPECT_EQ(choice(CollType::ReduceScatter, size_t{64} << 20, 8, one), AlgoId::HalvingDoubling);
}

// Host summation in the shared arena: two hand-offs through counters,
// whatever the rank count, sums of chunks the cache holds, and a copy in and
// out, so it takes the calls of several ranks of one host, small ones
// too (its hand-offs post no transport operation: without the probe's loop of
// them, a later step's cost each, which the test sets below the hop, as every
// probe has measured it), and
// large ones, where memory bounds every algorithm. Never across hosts, beyond
// kSharedSumMaxRanks, for the proxy's device calls, or once its arena could
// not be made.
TEST(HostAlgorithmChoice, SharedSumTakesTheCallsOfSeveralRanks) {
  SelectionConfig c = roomy();
  c.sharedSumUsable = true;
  c.machine.stepUs = 0.5;
  for (int n : {4, 8}) {
    for (size_t bytes : {size_t{8}, size_t{8} << 10}) {
      EXPECT_EQ(choice(CollType::AllReduce, bytes, n, c), AlgoId::SharedSum) << n << " " << bytes;
      EXPECT_EQ(choice(CollType::ReduceScatter, bytes, n, c), AlgoId::SharedSum)
          << n << " " << bytes;
    }
    EXPECT_EQ(choice(CollType::AllReduce, 256 << 20, n, c), AlgoId::SharedSum) << n;
  }
  const CallFacts eight = call(CollType::AllReduce, 64 << 20, 8);
  const CostTerms sum = hostAlgoCost(AlgoId::SharedSum, eight, c.machine);
  const CostTerms ring = hostAlgoCost(AlgoId::Ring, eight, c.machine);
  EXPECT_LT(sum.latency, ring.latency / 3);
  EXPECT_LT(sum.reduce, 0.6 * ring.reduce) << "the arena's chunks are summed in cache";

  SelectionConfig hosts = c;
  hosts.machine.hosts = 2;
  hosts.machine.ranksPerHost = 4;
  EXPECT_FALSE(hostAlgoServes(AlgoId::SharedSum, eight, hosts.machine));
  EXPECT_FALSE(
      hostAlgoServes(AlgoId::SharedSum, call(CollType::AllReduce, 1 << 20, 17), c.machine));
  EXPECT_FALSE(hostAlgoServes(AlgoId::SharedSum, call(CollType::AllGather, 1 << 20, 4), c.machine));
  CallFacts device = eight;
  device.device = true;
  for (const HostCandidate& h : rankHostAlgorithms(device, c)) EXPECT_NE(h.algo, AlgoId::SharedSum);
  SelectionConfig failed = c;
  failed.sharedSumUsable = false;
  EXPECT_EQ(choice(CollType::AllReduce, 1 << 20, 8, failed), AlgoId::Ring);
}

// Ranks of one host on two CPU packages: a flat algorithm waits for the
// packages' link at every step (its latency and rate, probed or assumed:
// twice the hop's latency, half its rate), and the hierarchical plans group
// the ranks by package and cross it once, so they take the large calls. No
// hierarchical candidate on one package or with packages of unequal ranks.
TEST(HostAlgorithmChoice, HierarchicalAcrossThePackagesOfOneHost) {
  SelectionConfig two = roomy();
  two.machine.packages = 2;
  two.machine.ranksPerPackage = 4;
  const CallFacts big = call(CollType::AllReduce, 64 << 20, 8);
  EXPECT_TRUE(hostAlgoServes(AlgoId::Hierarchical, big, two.machine));
  EXPECT_EQ(choice(CollType::AllReduce, 64 << 20, 8, two), AlgoId::Hierarchical);
  EXPECT_EQ(choice(CollType::AllReduce, 8, 8, two), AlgoId::RecursiveDoubling);
  // A probed slow link (0.5 GB/s, below the memory share of each of the 8
  // hops at once) slows the flat ring's every step.
  SelectionConfig slowLink = two;
  slowLink.machine.crossPackageGBs = 0.5;
  const CostTerms flat = hostAlgoCost(AlgoId::Ring, big, slowLink.machine);
  const CostTerms one = hostAlgoCost(AlgoId::Ring, big, roomy().machine);
  EXPECT_GT(flat.transfer, 2 * one.transfer) << "the ring runs at the link's rate";
  EXPECT_NEAR(crossPackageGBs(two.machine), 0.5 * two.machine.hopGBs[4], 1e-12);
  EXPECT_NEAR(crossPackageLatencyUs(two.machine), 2 * two.machine.hopLatencyUs, 1e-12);
  // A probed link as fast as a hop costs the flat ring nothing more.
  SelectionConfig fastLink = two;
  fastLink.machine.crossPackageGBs = 1000;
  fastLink.machine.crossPackageLatencyUs = 0.1;
  EXPECT_NEAR(hostAlgoCost(AlgoId::Ring, big, fastLink.machine).total(), one.total(), 1e-12);

  SelectionConfig uneven = two;
  uneven.machine.ranksPerPackage = 0;
  EXPECT_FALSE(hostAlgoServes(AlgoId::Hierarchical, big, uneven.machine));
  EXPECT_FALSE(hostAlgoServes(AlgoId::Hierarchical, big, roomy().machine));
}

TEST(ExplainHostChoice, NamesTheChoiceTheNextTwoAndTheDecidingTerm) {
  EXPECT_EQ(explainHostChoice(call(CollType::AllReduce, 8, 4), roomy()),
            "recursive_doubling 5.0 us (latency 100%); next ring 13.0 us, tree 17.0 us; assumed "
            "inputs (lanes-topo --probe measures them)");
  SelectionConfig forced = roomy();
  ASSERT_TRUE(NameList::parse(
      "ring", {"ring", "recursive_doubling", "chain", "pairwise", "direct", "tree"}, &forced.algo));
  const std::string text = explainHostChoice(call(CollType::AllReduce, 8, 4), forced);
  EXPECT_EQ(text.rfind("ring ", 0), 0u) << text;
  EXPECT_NE(text.find("LANES_ALGO=ring"), std::string::npos) << text;
  EXPECT_NE(text.find("recursive_doubling 5.0 us (left out by LANES_ALGO)"), std::string::npos)
      << text;
}

TEST(HostPlanCache, EveryCallOfASizeClassTakesTheClasssChoice) {
  EXPECT_EQ(sizeClassBytes(0), 0u);
  EXPECT_EQ(sizeClassBytes(1), 1u);
  EXPECT_EQ(sizeClassBytes(4096), 4096u);
  EXPECT_EQ(sizeClassBytes(4097), 8192u);
  const SelectionConfig c = roomy();
  const size_t crossover = allReduceCrossover(c, 8);
  ASSERT_GT(crossover, 8u);
  HostPlanCache cache;
  // Just above the previous class's top: the class's choice, which is the ring.
  EXPECT_EQ(cache.choose(CollType::AllReduce, crossover / 2 + 1, 8, c).algo, AlgoId::Ring);
  EXPECT_EQ(choice(CollType::AllReduce, crossover / 2 + 1, 8, c), AlgoId::Ring);
  EXPECT_EQ(cache.choose(CollType::AllReduce, crossover / 2, 8, c).algo, AlgoId::RecursiveDoubling);
  // Remembered: a config that would choose otherwise is not asked again.
  SelectionConfig forced = c;
  ASSERT_TRUE(NameList::parse("recursive_doubling",
                              {"ring", "recursive_doubling", "chain", "pairwise", "direct"},
                              &forced.algo));
  EXPECT_EQ(cache.choose(CollType::AllReduce, crossover, 8, forced).algo, AlgoId::Ring);
}

TEST(MachineFacts, ComeFromTheProbesWhereMeasuredElseAreAssumed) {
  topo::Topology t;
  t.cores = 6;
  MachineFacts assumed = machineFactsOf(t);
  EXPECT_FALSE(assumed.measured);
  EXPECT_EQ(assumed.cores, 6);
  t.probes.host.hopLatencyUs = 1.5;
  t.probes.host.callUs = 0.5;
  t.probes.host.memGBs = 20;
  t.probes.host.exchangeGBs = 9;
  for (int i = 0; i < topo::HostProbe::kCurvePoints; ++i) {
    t.probes.host.hopGBs.push_back(10 + i);
    t.probes.host.reduceGBs.push_back(30 - i);
  }
  const MachineFacts m = machineFactsOf(t);
  EXPECT_TRUE(m.measured);
  EXPECT_EQ(m.hopLatencyUs, 1.5);
  EXPECT_EQ(m.stepUs, 1.5) << "a cache from before the step probe: the hop";
  EXPECT_EQ(m.callUs, 0.5);
  EXPECT_EQ(m.exchangeGBs, 9);
  EXPECT_EQ(m.hopGBs[3], 13);
  EXPECT_EQ(m.reduceGBs[7], 23);
  EXPECT_EQ(m.socketGBs, MachineFacts().socketGBs);              // no TCP figures: assumed
  EXPECT_EQ(m.wireEncodeNs[1], MachineFacts().wireEncodeNs[1]);  // no codec figures: assumed
  t.probes.host.wireEncodeNs[1] = 2.5;
  t.probes.host.wireDecodeNs[0] = 0.5;
  EXPECT_EQ(machineFactsOf(t).wireEncodeNs[1], 2.5);
  EXPECT_EQ(machineFactsOf(t).wireDecodeNs[0], 0.5);
  t.probes.host.stepUs = 0.25;
  EXPECT_EQ(machineFactsOf(t).stepUs, 0.25);
  EXPECT_EQ(machineFactsOf(t).rootedUs, 0) << "a cache from before the rooted probe";
  EXPECT_EQ(machineFactsOf(t).sumUs, 0) << "a cache from before the host-summation probe";
  t.probes.host.sumUs = 2.5;
  EXPECT_EQ(machineFactsOf(t).sumUs, 2.5);
  EXPECT_EQ(machineFactsOf(t).rootedCallUs(), 2.0) << "the call and a hop";
  t.probes.host.rootedUs = 1.25;
  EXPECT_EQ(machineFactsOf(t).rootedUs, 1.25);

  // TCP over loopback, bounded by the fastest NIC's port speed.
  t.probes.host.tcpLatencyUs = 12;
  t.probes.host.tcpGBs = 4;
  EXPECT_EQ(machineFactsOf(t).socketLatencyUs, 12);
  EXPECT_EQ(machineFactsOf(t).socketGBs, 4);
  t.nics.resize(2);
  t.nics[0].gbps = 1.25;   // 10 GbE
  t.nics[1].gbps = 3.125;  // 25 GbE
  EXPECT_EQ(machineFactsOf(t).socketGBs, 3.125);
}

// The GPU figures: the probed GPU's curves and latencies where measured (the
// one with the rank's CUDA index), else the assumed Gen4 x16 rates scaled to
// the link the GPU trained at.
TEST(MachineFacts, GpuFiguresFromTheProbeElseScaledToTheLink) {
  topo::Topology t;
  t.nodes.resize(3);
  t.nodes[1].link.curGen = 4;
  t.nodes[1].link.curWidth = 8;  // an x8 slot
  t.nodes[2].link.curGen = 3;
  t.nodes[2].link.curWidth = 16;
  t.gpus.resize(2);
  t.gpus[0].node = 1;
  t.gpus[0].cudaIndex = 0;
  t.gpus[1].node = 2;
  t.gpus[1].cudaIndex = 1;
  const MachineFacts::Gpu gen4x16;
  MachineFacts m = machineFactsOf(t, 0);
  EXPECT_FALSE(m.gpu.measured);
  EXPECT_DOUBLE_EQ(m.gpu.h2dGBs[7], gen4x16.h2dGBs[7] / 2);
  m = machineFactsOf(t, 1);  // Gen3 x16: about half of Gen4 x16
  EXPECT_NEAR(m.gpu.d2hGBs[7], gen4x16.d2hGBs[7] / 2, 0.01);

  topo::GpuProbe probe;
  probe.gpu = 1;
  probe.h2d = 50;
  probe.d2h = 50;
  probe.bidir = 80;
  for (int i = 0; i < topo::HostProbe::kCurvePoints; ++i) {
    probe.h2dCurve.push_back(1 + i);
    probe.d2hCurve.push_back(2 + i);
  }
  probe.flagUs = 2.5;
  probe.launchUs = 3.5;
  t.probes.gpus.push_back(probe);
  m = machineFactsOf(t, 1);
  EXPECT_TRUE(m.gpu.measured);
  EXPECT_EQ(m.gpu.h2dGBs[2], 3);
  EXPECT_EQ(m.gpu.d2hGBs[7], 9);
  EXPECT_DOUBLE_EQ(m.gpu.bothWaysShare, 0.8);
  EXPECT_EQ(m.gpu.flagUs, 2.5);
  EXPECT_EQ(m.gpu.launchUs, 3.5);
  // The only probed GPU stands for the others; a probe without the latencies
  // (an older cache) is not taken.
  EXPECT_TRUE(machineFactsOf(t, 0).gpu.measured);
  t.probes.gpus[0].flagUs = 0;
  EXPECT_FALSE(machineFactsOf(t, 1).gpu.measured);
}

}  // namespace
}  // namespace lanes
