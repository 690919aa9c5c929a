#include "planner/host_costs.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "algorithms/tree.h"
#include "transport/shm/sum_arena.h"
#include "transport/transport_config.h"

namespace lanes {

double rateAt(const double* curve, double bytes) {
  constexpr int last = MachineFacts::kCurvePoints - 1;
  if (bytes <= MachineFacts::curveBytes(0)) return curve[0];
  for (int i = 0; i < last; ++i) {
    if (bytes > MachineFacts::curveBytes(i + 1)) continue;
    const double t = std::log(bytes / MachineFacts::curveBytes(i)) / std::log(4.0);
    return curve[i] + t * (curve[i + 1] - curve[i]);
  }
  return curve[last];
}

namespace {

constexpr double kFallFromBytes = 2.0 * (1 << 20);
constexpr double kFallToBytes = 256.0 * (1 << 20);

// What one rank's steps cost when `nranks` ranks of the host work at once.
// The hop curve was measured with one hop at a time between two buffers of
// the message's size; a collective whose ranks hold `buffers` bytes each
// touches nranks times that, so the curve is read there (the caches fill at
// the same total). Beyond the caches the rate falls, on a log scale between
// kFallFromBytes and kFallToBytes of working set, to a bound: what one of two
// hops at once was measured to get, and at most each of the `busy` hops'
// share of the host's memory bandwidth (a hop reads its source and writes its
// destination in memory; the transport's ring stays in cache). As one step at
// 16 MiB it priced every 8 MiB call of 2 and 4 ranks 1.1-3x too slow and the
// 2 MiB calls 1.2-1.6x too fast, on the 2-core VM and on the H200 machine's
// 16 cores alike.
// How an algorithm's hops meet, which decides the rates Steps reads. The
// cores of a host are time-shared beyond one rank each (its ranks: the
// communicator's spread over its hosts), except ByRoot's.
//  - Overlapped: a chain's pipelined chunks, loops of rooted calls, pairwise
//    exchanges and the two ranks' tree (each a leaf of the other's) overlap
//    their hops' fixed costs.
//  - ByRoot: a direct rooted call's loop runs at its root's pace, and the
//    others, waiting most of the time, leave it a core (fitted to 3 and 4
//    ranks on this 2-core VM, where the time-shared price made those calls
//    1.4-2.5x too slow).
//  - WholeSteps: a ring, recursive doubling and the tree's all-reduce beyond
//    two ranks (whose inner nodes take both children's chunks each step) wait
//    for every hop of a step before the next, so where every rank has a core
//    a hop costs at least what the probe measured for a message of the hop's
//    own size: read at the working set alone, the ring's 8-128 KiB
//    all-reduces of 4 and 8 processes on 16 cores took 1.7-3.5x their price
//    (the overlapped algorithms, priced so too, grew their errors).
enum class Pacing { Overlapped, ByRoot, WholeSteps };

class Steps {
 public:
  Steps(const MachineFacts& m, int nranks, double buffers, Pacing pacing = Pacing::Overlapped)
      : m_(m),
        wholeSteps_(pacing == Pacing::WholeSteps),
        share_(pacing == Pacing::ByRoot
                   ? 1.0
                   : std::min(1.0, std::max(1, m.cores) /
                                       std::ceil(double(nranks) / double(std::max(1, m.hosts))))),
        workingSet_(buffers * nranks / std::max(1, m.hosts)),
        crossesPackages_(m.hosts == 1 && m.packages > 1) {}

  // A flat algorithm over ranks of several packages waits, at each step, for
  // its hops across the packages' link too. Where ranks outnumber cores, a
  // hop finds its peer running only a core's share of the time; otherwise it
  // waits for the peer's turn (kUnscheduledPeerHopUs).
  double hop() const {
    const double base = hopBaseUs();
    if (share_ >= 1) return base * 1e-6;
    return (share_ * base + (1 - share_) * std::max(base, kUnscheduledPeerHopUs)) * 1e-6;
  }
  // The latency of `count` dependent steps of one call. The first waits for
  // the peers to arrive: a hop. The ranks are then in step, and on one host
  // with a core each a later step costs the probe's step (a loop of 2-rank
  // all-reduces: the ring's two steps against recursive doubling's one). A
  // step over sockets or across packages, or to a peer that may not be
  // running, costs a whole hop every time.
  double hops(double count) const { return count <= 0 ? 0 : hop() + (count - 1) * laterStep(); }
  double laterStep() const { return inStep() ? std::min(m_.stepUs, hopBaseUs()) * 1e-6 : hop(); }
  // Every rank has a core, on one host and package, as the probe's two ranks had.
  bool inStep() const { return share_ >= 1 && m_.hosts == 1 && !crossesPackages_; }
  double call() const { return m_.callUs * 1e-6 / share_; }
  // Moving `bytes` through one hop while `busy` hops move theirs.
  double transfer(double bytes, int busy) const {
    if (bytes <= 0) return 0;
    if (m_.hosts > 1) return bytes / (m_.socketGBs * 1e9 * share_);
    return memoryHop(bytes, busy);
  }
  // A hop through shared memory.
  double memoryHop(double bytes, int busy) const {
    return copyThroughMemory(bytes, busy, wholeSteps_ && inStep());
  }
  // A step that reduces what it receives reads it straight out of the
  // transport: through shared memory the reduction replaces the receive's
  // copy, half of a hop's transfer (a hop copies into the ring and out of
  // it). Between hosts the wire's time stays.
  double reducedTransfer(double bytes, int busy) const {
    return reducedShare() * transfer(bytes, busy);
  }
  double reducedShare() const { return m_.hosts > 1 ? 1.0 : 0.5; }
  // A copy within the rank (its own block to the output, out of place): one
  // copy, half a hop through shared memory.
  double localCopy(double bytes, int busy) const {
    return 0.5 * copyThroughMemory(bytes, busy, /*atMostItsSizesRate=*/false);
  }
  // `bytes` copied by the rank's own core, one copy after another, each at a
  // hop's rate: a hop's two copies (into the ring, out of it) run at once on
  // two cores.
  double coreCopies(double bytes) const {
    return bytes <= 0 ? 0 : bytes / curveRate(std::max(bytes, workingSet_));
  }
  // `bytes` read or written in the host's memory at all of its bandwidth,
  // as far as the working set has fallen out of the caches.
  double throughMemory(double bytes) const {
    return fallen(workingSet_) * bytes / (m_.memGBs * 1e9);
  }
  double reduce(double bytes) const { return reduceAt(bytes, std::max(bytes, workingSet_)); }
  // Reducing `bytes` whose operands fit in `workingSet` bytes of cache.
  double reduceAt(double bytes, double workingSet) const {
    return bytes <= 0 ? 0 : bytes / (rateAt(m_.reduceGBs, workingSet) * 1e9 * share_);
  }

 private:
  // `bytes` copied through shared memory; `atMostItsSizesRate`: no faster than
  // the curve at the copy's own size (a hop a whole step waits for).
  double copyThroughMemory(double bytes, int busy, bool atMostItsSizesRate) const {
    if (bytes <= 0) return 0;
    const double touched = std::max(bytes, workingSet_);
    double rate = curveRate(touched);
    if (atMostItsSizesRate) rate = std::min(rate, curveRate(bytes));
    const double cap = std::min(m_.exchangeGBs, m_.memGBs / std::max(1, busy)) * 1e9;
    if (const double t = fallen(touched); cap < rate && t > 0)
      rate = t >= 1 ? cap : std::exp((1 - t) * std::log(rate) + t * std::log(cap));
    if (crossesPackages_) rate = std::min(rate, crossPackageGBs(m_) * 1e9 * share_);
    return bytes / rate;
  }

  const MachineFacts& m_;
  bool wholeSteps_;
  double share_;
  double workingSet_;
  bool crossesPackages_;

  // How far `touched` bytes have fallen out of the caches: 0 up to
  // kFallFromBytes, 1 from kFallToBytes, on a log scale between.
  static double fallen(double touched) {
    if (touched <= kFallFromBytes) return 0;
    return std::min(1.0,
                    std::log(touched / kFallFromBytes) / std::log(kFallToBytes / kFallFromBytes));
  }
  // The measured hop curve at `touched` bytes, in bytes per second of this
  // rank's share of a core.
  double curveRate(double touched) const { return rateAt(m_.hopGBs, touched) * 1e9 * share_; }
  double hopBaseUs() const {
    return m_.hosts > 1
               ? m_.socketLatencyUs
               : std::max(m_.hopLatencyUs, crossesPackages_ ? crossPackageLatencyUs(m_) : 0);
  }
};

// The larger of a rank's two buffers, in bytes, for `s` input bytes per rank.
double bufferBytes(CollType coll, double s, int n) {
  switch (coll) {
    case CollType::AllGather:
    case CollType::AlltoAll:
    case CollType::Gather:
    case CollType::Scatter:
      return s * n;
    default:
      return s;
  }
}

// The double binary tree (algorithms/tree.h). An all-reduce waits for its
// chunks to go up and down: each step on the way costs a hop in each of the
// two trees (a rank takes part in both), and the chunks pipeline; the bytes a rank moves are
// bounded by its busiest rank's tree edges (TreeDepth::links), half the buffer each way over each:
// an inner node of one tree, a leaf of the other, sends and receives about twice the buffer, a
// rank of two ranks' trees (a root and a leaf) once. Rooted calls' bytes are priced as they run
// back to back, like the chain's: the busiest rank sets the pace. An inner node sends what it
// takes in to two children: two hops (not the chain's overlap: on 16 cores the tree's 4 and 8
// ranks' 2-128 MiB broadcasts took 0.66-0.99 of that, 1.3-1.4x the chain's time); their latency
// is rootedLoopUs's where the probe measured a rooted call, else the call and a hop.
// Beyond two ranks an all-reduce's busiest rank also does all of its copies and reductions on
// its one core, one after another at its hop rate (a reduction out of the transport reads one
// operand in the ring, as a copy does): priced by its edges alone, the 512 KiB-2 MiB calls of 3
// to 8 ranks took 1.2-2.1x their price in 17 of the 19 stored rank groups. Two ranks' trees keep
// the edges' price: each rank is a root and a leaf, and priced so too, their error grew.
CostTerms treeCost(const CallFacts& f, const Steps& steps) {
  CostTerms c;
  const double s = static_cast<double>(f.bytes);
  if (f.coll == CollType::Reduce) {
    c.transfer = (f.nranks > 2 ? 1 : 0) * steps.reducedTransfer(s, f.nranks - 1);
    c.reduce = steps.reduce(s);
    return c;
  }
  if (f.coll != CollType::AllReduce) {
    c.transfer = (f.nranks > 2 ? 2 : 1) * steps.transfer(s, f.nranks - 1);
    return c;
  }
  const int chunks = algo::treeChunks(f.bytes);
  const double chunk = s / 2 / chunks;
  const algo::TreeDepth depth = algo::treeDepth(f.coll, f.nranks);
  const int stepCount = depth.up + depth.down + chunks - 1;
  c.latency = steps.hops(2 * stepCount);
  // Half of the bytes go up, reduced out of the transport as they arrive.
  c.transfer =
      (0.5 + 0.5 * steps.reducedShare()) * std::max(stepCount * steps.transfer(2 * chunk, f.nranks),
                                                    steps.transfer(depth.links * s / 2, f.nranks));
  c.reduce = (depth.up + chunks - 1) * steps.reduce(chunk);
  if (f.nranks > 2) {
    c.transfer = std::max(c.transfer, steps.coreCopies(depth.copies * s / 2));
    c.reduce = std::max(c.reduce, steps.coreCopies(depth.reduces * s / 2));
  }
  return c;
}

// The hierarchical collectives (algorithms/hierarchical.cc): rings among
// each host's L ranks through shared memory and one ring step across the H
// hosts, whose L flows (one per local index) share the host's one link.
//  - all-reduce: a reduce-scatter and an all-gather within, an all-reduce of
//    each shard across: the link carries 2(H-1)/H of the buffer, where a
//    flat ring through it carries 2(N-1)/N;
//  - all-gather (s: a rank's block): H-1 blocks per flow across, then each
//    rank's H blocks around the host;
//  - reduce-scatter (s: a rank's whole input, N blocks): each rank's H
//    blocks reduced around the host, then H-1 blocks per flow across.
CostTerms hierarchicalCost(const CallFacts& f, const MachineFacts& m) {
  // The groups: hosts, or the CPU packages of one host, whose link the
  // across step takes (socket hops, or hops at the cross-package figures).
  const bool byHost = m.hosts > 1;
  const int hosts = byHost ? m.hosts : m.packages;
  const int local = byHost ? m.ranksPerHost : m.ranksPerPackage;
  const double s = static_cast<double>(f.bytes);
  MachineFacts one = m;
  one.hosts = 1;
  one.packages = 1;
  const Steps within(one, local, s);
  MachineFacts link = m;
  if (!byHost) {
    link.hopLatencyUs = link.stepUs = crossPackageLatencyUs(m);
    for (double& gbs : link.hopGBs) gbs = std::min(gbs, crossPackageGBs(m));
    link.packages = 1;
  }
  const Steps across(link, f.nranks, s);
  CostTerms c;
  c.latency = within.call();
  switch (f.coll) {
    case CollType::AllGather:
      c.latency += within.hops(local - 1) + across.hops(hosts - 1);
      c.transfer = (hosts - 1) * across.transfer(local * s, local) +
                   (local - 1) * within.transfer(hosts * s, local);
      break;
    case CollType::ReduceScatter: {
      const double block = s / f.nranks;
      c.latency += within.hops(local - 1) + across.hops(hosts - 1);
      c.transfer = (local - 1) * within.transfer(hosts * block, local) +
                   (hosts - 1) * across.transfer(local * block, local);
      c.reduce = (local - 1) * within.reduce(hosts * block) + (hosts - 1) * across.reduce(block);
      break;
    }
    default:
      c.latency += within.hops(2 * (local - 1)) + across.hops(2 * (hosts - 1));
      c.transfer = 2 * (local - 1) * within.transfer(s / local, local) +
                   2 * (hosts - 1) * across.transfer(s / hosts, local);
      c.reduce =
          (local - 1) * within.reduce(s / local) + (hosts - 1) * across.reduce(s / local / hosts);
      break;
  }
  return c;
}

// Host summation of host buffers (exec/arena_sum.h), one host: each rank
// copies its input into the shared arena, sums its 1/N segment of all N
// inputs there and copies the result out.
//  - latency: the call and two hand-offs (its input seen by the others,
//    their sums seen by it), each a flag of every rank in the arena that a
//    rank waits on, with no transport operation to post or match. Where the
//    probe timed a loop of two ranks' calls and every rank has a core, that
//    loop's call at any rank count, a reduce-scatter's too (unmeasured apart).
//    On an H100 machine's 16 cores 2, 4 and 8 processes' small calls took 3.6,
//    3.4 and 2.8 us where the loop took 3.6; a tenth more per rank beyond two
//    priced 8 processes' small calls at 2.1x what they took. Priced as the call
//    and two of the probe's later steps, the small calls of 4 and 8 processes
//    on 16 cores took 1.1-2.6x their price in six runs: the probe's step
//    (0.2-1.6 us between probes of one machine) is the difference of two loops.
//    Else (ranks sharing cores, or no arena in the probe) the call and two
//    later steps;
//  - transfer: a copy of the input in and of the output out, both on the
//    rank's core, one after the other; beyond the caches, where memory
//    bounds them, as one hop (a ring step's send and receive at once). Priced
//    as one hop everywhere, host summation's 128 KiB-2 MiB calls took
//    1.5-2.6x their price on both machines;
//  - reduction: N - 1 binary sums of S/N, at the rate of the arena's chunk,
//    which the puts just wrote and the sum reads from the cache (a rate at
//    the whole buffer's size priced 4 ranks' 128 MiB reduce-scatter at 52 ms
//    where it took 31).
// A reduce-scatter copies its whole input in and its block out
// (bench/results/shared_sum_host).
CostTerms sharedSumCost(const CallFacts& f, const MachineFacts& m, const Steps& steps) {
  const int n = f.nranks;
  const double s = static_cast<double>(f.bytes);
  CostTerms c;
  if (m.sumUs > 0 && steps.inStep())
    c.latency = m.sumUs * 1e-6;
  else
    c.latency = steps.call() + 2 * steps.laterStep();
  const double out = f.coll == CollType::ReduceScatter ? s / n : s;
  c.transfer = std::max(steps.coreCopies(s + out), steps.transfer((s + out) / 2, n));
  c.reduce = (n - 1) * steps.reduceAt(s / n, std::min(s, double(SumArena::kChunkBytes)));
  return c;
}

int log2Floor(int n) {
  int l = 0;
  while ((2 << l) <= n) ++l;
  return l;
}

// Halving-doubling (algorithms/halving_doubling.cc): log2(p) halving rounds
// that each send half of what the rank still holds and reduce the other half
// as it arrives, and for an all-reduce as many doubling rounds back; the
// ring's bytes in 2 log2(p) hops instead of 2(n-1). An all-reduce of n ranks
// beyond the power of two p folds the extra ranks in first and hands them
// the result last: two more hops of the whole buffer. s: a reduce-scatter's
// whole input (n blocks), an all-reduce's buffer.
CostTerms halvingDoublingCost(const CallFacts& f, const Steps& steps) {
  CostTerms c;
  const int n = f.nranks;
  const int p = 1 << log2Floor(n);
  const double s = static_cast<double>(f.bytes);
  const bool allReduce = f.coll == CollType::AllReduce;
  int hops = 0;
  for (double part = s / 2; part >= s / p; part /= 2, ++hops) {
    c.transfer += steps.reducedTransfer(part, n) + (allReduce ? steps.transfer(part, n) : 0);
    c.reduce += steps.reduce(part);
  }
  hops *= allReduce ? 2 : 1;
  if (allReduce && p != n) {
    hops += 2;
    c.transfer += steps.reducedTransfer(s, n) + steps.transfer(s, n);
    c.reduce += steps.reduce(s);
  }
  c.latency = steps.hops(hops);
  return c;
}

// A loop of rooted calls overlaps each call with the next: a direct one costs
// the probe's rooted call R at any rank count. A chain longer than two ranks
// costs R/8 more where every rank has a core and the ranks forward at once
// (1.0-1.45 R, 1.18 R on average, at 4 and 8 ranks on 16 cores), else R/4 more
// for each rank beyond the host's cores, whose turns the others wait for
// (1.1-1.3 R at 3 ranks, 1.4-1.8 R at 4 on the 2-core VM). The double tree,
// whose two halves take two trees, costs R and R/2 per level of its depth
// (1.5-1.9 R at 2 ranks, 1.4-2.7 R at 4 and 1.9-2.7 R at 8 on 16 cores), and
// R/4 more per rank beyond the cores. R is not divided by a core share. The
// probe's later step, 0.3-1.3 us between probes on the VM, priced them no
// better. 0: not priced so.
double rootedLoopUs(AlgoId algo, const CallFacts& f, const MachineFacts& m) {
  // The probe's two ranks are on one host: across hosts, or across CPU
  // packages, the hop there prices it (the call and a hop).
  if (!isRooted(f.coll) || m.rootedUs <= 0 || m.hosts > 1 || m.packages > 1) return 0;
  const double waiting = std::max(0, f.nranks - std::max(1, m.cores));
  if (algo == AlgoId::Direct) return m.rootedUs;
  if (algo == AlgoId::Chain)
    return m.rootedUs * (1 + (f.nranks <= 2 ? 0 : waiting > 0 ? 0.25 * waiting : 0.125));
  if (algo == AlgoId::Tree)
    return m.rootedUs * (1 + 0.5 * (log2Floor(f.nranks - 1) + 1) + 0.25 * waiting);
  return 0;
}

}  // namespace

std::string CostTerms::deciding() const {
  const double t = total();
  if (t <= 0) return "nothing to move";
  const char* name = "latency";
  double v = latency;
  if (transfer > v) {
    name = "transfer";
    v = transfer;
  }
  if (reduce > v) {
    name = "reduction";
    v = reduce;
  }
  if (memory > v) {
    name = "host memory";
    v = memory;
  }
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%s %.0f%%", name, 100 * v / t);
  return buf;
}

bool hostAlgoServes(AlgoId algo, const CallFacts& f, const MachineFacts& m) {
  if (!algoSupports(algo, f.coll, f.nranks)) return false;
  if (algo == AlgoId::SharedSum)
    return m.hosts == 1 && f.nranks > 1 && f.nranks <= kSharedSumMaxRanks;
  if (algo != AlgoId::Hierarchical) return true;
  if (m.hosts > 1) return m.ranksPerHost > 1 && m.hosts * m.ranksPerHost == f.nranks;
  return m.packages > 1 && m.ranksPerPackage > 1 && m.packages * m.ranksPerPackage == f.nranks;
}

double crossPackageLatencyUs(const MachineFacts& m) {
  return m.crossPackageLatencyUs > 0 ? m.crossPackageLatencyUs : 2 * m.hopLatencyUs;
}

double crossPackageGBs(const MachineFacts& m) {
  return m.crossPackageGBs > 0 ? m.crossPackageGBs : 0.5 * m.hopGBs[4];
}

// What a TCP connection holds in flight: the socket transport's ring per lane
// and direction at its default (LANES_SOCKET_RING_BYTES, which the model does
// not read).
constexpr double kSocketWindowBytes = static_cast<double>(kDefaultSocketRingBytes);

CostTerms hostAlgoCost(AlgoId algo, const CallFacts& f, const MachineFacts& m) {
  CostTerms c;
  const int n = f.nranks;
  if (n <= 1 || f.bytes == 0) return c;
  const double s = static_cast<double>(f.bytes);
  const int k = n - 1;
  // Every input byte of host summation also passes through its arena (put
  // there, read by the sums, the results read back): priced at twice the
  // ranks' working set, fitted (at the buffers alone, its 2-rank 8 and 32 MiB
  // all-reduces took 1.5-1.6x their price on the VM).
  const double buffers = bufferBytes(f.coll, s, n) * (algo == AlgoId::SharedSum ? 2 : 1);
  // A direct rooted call keeps its root busy and the others waiting; a chain
  // or a tree pipelines through every rank at once.
  Pacing pacing = Pacing::Overlapped;
  if (isRooted(f.coll) && algo == AlgoId::Direct) pacing = Pacing::ByRoot;
  if (algo == AlgoId::Ring || algo == AlgoId::RecursiveDoubling ||
      algo == AlgoId::HalvingDoubling ||
      (algo == AlgoId::Tree && f.coll == CollType::AllReduce && n > 2))
    pacing = Pacing::WholeSteps;
  const Steps steps(m, n, buffers, pacing);
  c.latency = rootedLoopUs(algo, f, m) * 1e-6;
  if (c.latency == 0) {
    // A rooted call's ranks hand its data on once, the root's to the others
    // or theirs to it: a loop of them takes about a two-rank recursive
    // doubling's call and hop (measured on the H200's 16 cores). Rooted calls
    // without the probe's figure, or across hosts or packages, are priced so.
    c.latency = steps.call();
    if (isRooted(f.coll)) c.latency += steps.hops(1);
  }
  if (algo == AlgoId::Hierarchical) return hierarchicalCost(f, m);
  if (algo == AlgoId::SharedSum) return sharedSumCost(f, m, steps);
  if (algo == AlgoId::Tree || algo == AlgoId::HalvingDoubling) {
    const CostTerms own = algo == AlgoId::Tree ? treeCost(f, steps) : halvingDoublingCost(f, steps);
    c.latency += own.latency;
    c.transfer = own.transfer;
    c.reduce = own.reduce;
    return c;
  }
  switch (f.coll) {
    case CollType::AllReduce:
      if (algo == AlgoId::RecursiveDoubling) {
        // Rounds of whole-buffer exchanges; ranks beyond a power of two fold
        // in first and get the result last (two more rounds).
        const int extra = (n & (n - 1)) != 0 ? 2 : 0;
        const int rounds = log2Floor(n) + extra;
        c.latency += steps.hops(rounds);
        const int reducing = rounds - extra / 2;
        c.transfer =
            reducing * steps.reducedTransfer(s, n) + (rounds - reducing) * steps.transfer(s, n);
        c.reduce = reducing * steps.reduce(s);
      } else {  // ring: reduce-scatter then all-gather of s/n segments
        c.latency += steps.hops(2 * k);
        c.transfer = k * steps.reducedTransfer(s / n, n) + k * steps.transfer(s / n, n);
        c.reduce = k * steps.reduce(s / n);
        // Two ranks on two hosts: the reduced half goes back over the one
        // connection in the pieces its reduction makes of what arrives,
        // where recursive doubling posts its whole buffer at once: on two
        // namespace hosts of the 2-core VM the ring took 1.0-1.6x recursive
        // doubling's time at 1-16 MiB and the same from 64 MiB, with 3x its
        // sendmsg calls and 1.6 of 2 cores busy against 1.9
        // (bench/results/tcp_netns/algo_choice). Priced as a socket ring's
        // worth of that half not overlapping the first (fitted; every hop
        // between hosts is priced at the TCP figures, verbs too).
        if (n == 2 && m.hosts > 1)
          c.transfer += steps.transfer(std::min(s / 2, kSocketWindowBytes), n);
      }
      break;
    case CollType::AllGather:  // s: each rank's piece
      c.latency += steps.hops(algo == AlgoId::RecursiveDoubling ? log2Floor(n) : k);
      if (algo == AlgoId::RecursiveDoubling) {
        for (int pieces = 1; pieces < n; pieces *= 2) c.transfer += steps.transfer(pieces * s, n);
      } else {
        c.transfer = k * steps.transfer(s, n);
      }
      c.transfer += steps.localCopy(s, n);  // its own piece, out of place
      break;
    case CollType::ReduceScatter:  // s: each rank's whole input
      c.latency += steps.hops(k);
      c.transfer = k * steps.reducedTransfer(s / n, n);
      c.reduce = k * steps.reduce(s / n);
      break;
    case CollType::Broadcast:
    case CollType::Reduce: {
      // Rooted calls are priced as they run back to back (a training loop,
      // the perf tools): each rank moves on once its part is done, so the
      // next call overlaps this one and the busiest rank sets the pace.
      const bool reduces = f.coll == CollType::Reduce;
      const bool onePackage = m.hosts == 1 && m.packages == 1;
      if (algo == AlgoId::Direct) {
        // The root takes each rank in turn: a broadcast copies into each
        // rank's ring, one copy after another on its core, while the ranks
        // copy out beside it: the larger of those copies, the memory all k
        // copies read and write once the caches no longer hold them, and one
        // hop (two ranks: the hop). Priced as k hops one after another, the
        // 2-128 MiB broadcasts of 4 and 8 ranks took 0.44-0.69 of their price
        // on 16 cores. Fitted on one host and CPU package; across hosts or
        // packages the root's link carries each copy: k hops. A reduce
        // reduces each piece straight out of the transport (one pass), while
        // the senders' copies run beside it.
        if (reduces)
          c.reduce = k * steps.reduce(s);
        else if (k == 1 || !onePackage)
          c.transfer = k * steps.transfer(s, k);
        else
          c.transfer = std::max(
              {steps.coreCopies(k * s), steps.transfer(s, k), steps.throughMemory(2 * k * s)});
      } else {
        // Chain: a middle rank takes the buffer in and passes it on, each
        // chunk as it arrives, so on one host and package its receive and
        // send overlap as a ring step's do: a quarter of a hop more than one
        // hop (fitted: priced as two hops, 4 and 8 ranks' 2-128 MiB
        // broadcasts took 0.55-0.77 of their price on 16 cores, 3 and 4
        // ranks' 0.53-0.91 on the VM); elsewhere, unmeasured, two hops. A
        // reduce reduces it straight out of the transport on the way (at
        // the root, the busiest rank of two, that is all it does).
        if (reduces) {
          c.transfer = (n > 2 ? 1 : 0) * steps.reducedTransfer(s, k);
          c.reduce = steps.reduce(s);
        } else {
          c.transfer = (n > 2 ? (onePackage ? 1.25 : 2) : 1) * steps.transfer(s, k);
        }
      }
      break;
    }
    case CollType::AlltoAll:  // s: what each rank sends each peer
      c.latency += steps.hops(k);
      c.transfer = k * steps.transfer(s, n) + steps.localCopy(s, n);
      break;
    case CollType::Gather:
    case CollType::Scatter:  // s: one rank's piece; the root moves k of them, back to back
      c.transfer = k * steps.transfer(s, k);
      break;
  }
  return c;
}

}  // namespace lanes
