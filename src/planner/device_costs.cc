#include "planner/device_costs.h"

#include <algorithm>
#include <cmath>

#include "exec/staged_chunking.h"
#include "kernels/cuda/simple_collective.h"

namespace lanes {
namespace {

constexpr double kUs = 1e-6;
// A kernel reading its inputs in device memory: far above any PCIe link, so
// only a latency-bound path (shared context) ever reads it.
constexpr double kDeviceMemoryGBs = 1000;
// The staged path's copies between slots within one GPU stream at about this
// share of the probe's one-stream peak (H200, thread ranks and processes under
// MPS, 2 and 4 ranks, 8-32 MiB).
constexpr double kStagedD2dShare = 0.45;
// A CUDA call's enqueue on the host (a copy, an event, a counter): not the
// launch probe, which times the GPU's turnaround; measured as the thread
// ranks' staged and shared-context latencies on the H200 (docs/planner.md).
constexpr double kEnqueueCallUs = 2.5;
// A CPU store releasing a stream parked on it in host memory (the host
// summation's `reduced`): the GPU's polls of host memory, measured at about
// 16 us when Lanes' data path was designed (not yet on the H200).
constexpr double kHostReleaseUs = 16;
// Processes sharing a GPU without MPS take turns in time slices. A staged
// reduce-scatter waits a whole slice per peer for their copies, once for a
// call of one slot's worth (LANES_STAGE_CHUNK_BYTES) and twice for more; an
// all-reduce or all-gather waits for context switches, per peer once per
// call and once per pipeline chunk; a broadcast (one writer) hardly at all.
// Measured on the H200 with 2, 4 and 8 processes, up to 128 MiB (docs/planner.md).
double timeSliceWaitsUs(CollType coll, int n, double chunks, double slots) {
  switch (coll) {
    case CollType::Broadcast:
      return 0;
    case CollType::ReduceScatter:
      return 2200 * (n - 1) * std::min(slots, 2.0);
    default:
      return (n - 1) * (100 + 45 * chunks);
  }
}

// The copies of one GPU's link. `sharers` ranks of that GPU copy at once
// (their copies queue on the same engines); `bothWays`: the other direction
// is busy too, which costs each direction a share of its rate.
class GpuLink {
 public:
  GpuLink(const MachineFacts& m, int ranksPerGpu)
      : gpu_(m.gpu), memGBs_(m.memGBs), ranksPerGpu_(std::max(1, ranksPerGpu)) {}
  int ranksPerGpu() const { return ranksPerGpu_; }
  // The staging slots are in GPU memory (P2P): "down" and "up" copy within
  // a GPU where every rank is on one, else between GPUs at the P2P rate;
  // neither touches host memory.
  void slotsInGpuMemory(bool oneGpu) { slots_ = oneGpu ? Slots::SameGpu : Slots::PeerGpu; }
  bool slotsInHostMemory() const { return slots_ == Slots::Host; }
  // `bytes` down (D2H) in copies of `copyBytes`.
  double down(double bytes, double copyBytes, bool bothWays, int sharers = 0) const {
    return move(gpu_.d2hGBs, bytes, copyBytes, bothWays, sharers);
  }
  double up(double bytes, double copyBytes, bool bothWays, int sharers = 0) const {
    return move(gpu_.h2dGBs, bytes, copyBytes, bothWays, sharers);
  }
  // `bytes` of DMA into and out of host memory by every rank at once: a
  // copy's bandwidth counts each byte twice (read and write), DMA once.
  double hostMemory(double bytes) const {
    return slotsInHostMemory() ? bytes / (2 * memGBs_ * 1e9) : 0;
  }
  double launch() const { return gpu_.launchUs * kUs; }
  double flag() const { return gpu_.flagUs * kUs; }

 private:
  enum class Slots { Host, SameGpu, PeerGpu };
  double move(const double* curve, double bytes, double copyBytes, bool bothWays,
              int sharers) const {
    if (bytes <= 0) return 0;
    const double size = std::max(1.0, copyBytes);
    double rate = 0;
    switch (slots_) {
      case Slots::Host:  // the link, each direction shared when both are busy
        rate = rateAt(curve, size) * (bothWays ? gpu_.bothWaysShare : 1.0);
        break;
      case Slots::SameGpu:  // device memory, which every rank's copies share
        // A copy's fixed cost overlaps the enqueue work priced as latency;
        // the stream of chunks gets a share of the one-stream peak.
        rate = kStagedD2dShare * gpu_.d2dGBs[MachineFacts::kCurvePoints - 1];
        break;
      case Slots::PeerGpu:  // over the link to the peer, at most the copy's own rate
        rate = std::min(gpu_.p2pGBs, rateAt(gpu_.d2dGBs, size));
        break;
    }
    // A copy to host memory below the curve's first size costs what a copy
    // of that size does: its fixed cost is all there is. (Within a GPU the
    // small copies' fixed costs overlap the enqueue, priced as latency.)
    if (slots_ == Slots::Host) rate *= std::min(1.0, size / MachineFacts::curveBytes(0));
    return bytes * (sharers > 0 ? sharers : ranksPerGpu_) / (rate * 1e9);
  }
  const MachineFacts::Gpu& gpu_;
  double memGBs_;
  int ranksPerGpu_;
  Slots slots_ = Slots::Host;
};

// CUDA calls a rank's enqueue makes for one chunk of a staged call (copies,
// counters, events, the reduce kernel), each about a launch's cost. Thread
// ranks of one process enqueue one after another (their hand-offs keep
// submission order), so theirs add up on the call's critical path. Fitted to
// the H200 with 2 and 4 thread ranks (docs/planner.md).
double stagedEnqueueCalls(CollType coll, int n) {
  switch (coll) {
    case CollType::AllGather:
      return 7.5;
    case CollType::Broadcast:
      return 3;
    case CollType::ReduceScatter:
      return 5 + 0.75 * n;
    default:
      return 4 + 1.5 * n;
  }
}

// Calls run back to back (a step's gradient buckets, every benchmark loop):
// with slots in host memory a staged call's first chunk going up overlaps the
// next call's going down, on the link's other copy engine, because a rank
// that finishes its part early starts its next call. About half of the
// shorter stage stays on the critical path (H200, 2 processes under MPS, P2P
// off, all-reduce, all-gather, reduce-scatter and broadcast at 512 KiB-8 MiB:
// 0.5 fits all four within 20%, where a serial fill priced them 1.2-1.4x too
// slow; bench/results/mps_paths_h200). Copies within a GPU share its memory
// and do not overlap so.
constexpr double kHostSlotFillSerialShare = 0.5;

// A pipeline of `chunks` chunks whose down and up stages overlap: the first
// chunk goes down and then up, of which `fillSerialShare` of the shorter stage
// is on the call's critical path; each later one adds its slowest stage; host
// memory carries every chunk's traffic whatever overlaps. Each part of the
// time goes to the term that bounds it (transfer: the link; memory).
void pipeline(double chunks, double down, double up, double hostMemory, CostTerms* t,
              double fillSerialShare = 1.0) {
  const double later = std::max(0.0, chunks - 1);
  const double links = std::max(down, up);
  const double fill = links + fillSerialShare * std::min(down, up);
  (hostMemory > links ? t->memory : t->transfer) += later * std::max(links, hostMemory);
  (hostMemory > fill ? t->memory : t->transfer) += std::max(fill, hostMemory);
}

// Bytes a rank copies down (its input) and up (its result) through the proxy,
// for `s` input bytes per rank (the units of CallFacts::bytes).
struct Flow {
  double down, up;
};
Flow proxyFlow(CollType coll, double s, int n) {
  switch (coll) {
    case CollType::AllGather:
    case CollType::Gather:  // the root's result is the largest
      return {s, s * n};
    case CollType::ReduceScatter:
      return {s, s / n};
    case CollType::AlltoAll:
      return {s * n, s * n};
    case CollType::Scatter:
      return {s * n, s};
    default:
      return {s, s};
  }
}

CostTerms proxyCost(const CallFacts& f, const GpuLink& link, const CostTerms& host) {
  const Flow flow = proxyFlow(f.coll, static_cast<double>(f.bytes), f.nranks);
  CostTerms c = host;
  // The stream hands the input to the proxy thread by a counter, the thread
  // hands the batch to the host engine, and the stream waits on another
  // counter for the result; the host engine runs a batch as one group.
  c.latency += 3 * link.flag();
  // Between processes time-slicing a GPU, a call whose copy moves less than
  // 2 KiB takes about 165 us more per peer than one of 2 KiB (measured on
  // the H200 with 2, 4 and 8 processes, all-reduce and reduce-scatter; the
  // cause is not known: the copies' own time does not change).
  if (f.timeSliced && std::min(flow.down, flow.up) < 2048) c.latency += (f.nranks - 1) * 165 * kUs;
  // The copies also pass through host memory, which every rank's share at once.
  pipeline(1, link.down(flow.down, flow.down, false), link.up(flow.up, flow.up, false),
           link.hostMemory(f.nranks * (flow.down + flow.up)), &c);
  return c;
}

// Chunk bytes of a staged call of `s` bytes, as the staged path cuts it.
double stagedChunk(const CallFacts& f, double s) {
  const size_t chunk = staged::pipelineChunkBytes(f.staged.slotBytes, static_cast<size_t>(s));
  return std::min(static_cast<double>(chunk), s);
}

CostTerms stagedCost(const CallFacts& f, GpuLink link) {
  const int n = f.nranks;
  if (f.staged.inGpuMemory) link.slotsInGpuMemory(link.ranksPerGpu() >= n);
  const double s = static_cast<double>(f.bytes);
  const double c = stagedChunk(f, s);
  const double chunks = std::ceil(s / c);
  const int g = link.ranksPerGpu();
  CostTerms t;
  double down = 0, up = 0, memory = 0;
  // Latency: the hand-offs on a call's critical path, each an event between
  // two of the rank's streams or a counter between ranks (priced alike), and
  // the reduce kernels' launches. The copies' fixed costs are in their rates.
  switch (f.coll) {
    case CollType::AllGather:  // s: each rank's piece; it goes down once, the others' come up
      down = link.down(c, c, true);
      up = link.up((n - 1) * c, c, true);
      memory = link.hostMemory(n * c * n);
      t.latency = 3 * link.flag();  // user -> down, ready, up -> user
      break;
    case CollType::Broadcast:  // the root's GPU down, every other rank's up
      down = link.down(c, c, true, 1);
      up = link.up(c, c, true, std::min(g, n - 1));
      memory = link.hostMemory(n * c);
      t.latency = 3 * link.flag();
      break;
    case CollType::ReduceScatter:  // s: the whole input; pieces of s/n go down to their owners
      down = link.down((n - 1) * c / n, c / n, true);
      up = link.up((n - 1) * c / n, c / 2, true);
      memory = link.hostMemory(2 * (n - 1) * c);
      t.latency = link.launch() + 4 * link.flag();  // user -> down, ready, up -> reduce -> user
      break;
    default:  // all-reduce: the peers' pieces and my result down, peers' pieces and results up
      down = link.down(c, c / n, true);
      up = link.up(2.0 * (n - 1) / n * c, c / 2, true);
      memory = link.hostMemory(n * c * (3.0 - 2.0 / n));
      // user -> A, ready, B1 -> B2, reduced, B2 -> C, C -> user, consumed
      t.latency = link.launch() + 7 * link.flag();
      break;
  }
  // Each rank's enqueue of a chunk is on its call's critical path; thread
  // ranks of one process enqueue one after another, so theirs add up.
  t.latency += (f.threadRanks ? n : 1) * stagedEnqueueCalls(f.coll, n) * kEnqueueCallUs * kUs;
  if (f.timeSliced) {
    const double slots =
        std::ceil(s / static_cast<double>(std::max<size_t>(1, f.staged.slotBytes)));
    t.latency += timeSliceWaitsUs(f.coll, n, chunks, slots) * kUs;
  }
  // A batch of all-reduces runs call after call, each its own pipeline.
  t.latency *= std::max(1, f.calls);
  pipeline(chunks, down, up, memory, &t, link.slotsInHostMemory() ? kHostSlotFillSerialShare : 1.0);
  return t;
}

// A compressed wire's bytes per float32 byte (kernels/cpu/wire_codec.h).
double wireShare(WireFormat wire) {
  const WireCodec codec(wire);
  return static_cast<double>(codec.frameBytes(codec.frameElems())) /
         static_cast<double>(codec.frameElems() * sizeof(float));
}

// Host summation (exec/cuda/staged_host_sum.cc): each rank's chunk goes down
// whole, every rank's reducer threads sum its segment of all of them in host
// memory, and the sums come up (all of them for an all-reduce, the rank's own
// for a reduce-scatter). Three stages pipelined over the chunks. Host memory
// carries the N downloads, the reducers' reads of them and their one write
// of the result: (2N+1) chunks; the uploads read that result right after it
// was written, from the cache (fitted on the H200: 2, 4 and 8 processes,
// 512 KiB-128 MiB, bench/results/host_sum_h200).
CostTerms hostSumCost(const CallFacts& f, const GpuLink& link, const MachineFacts& m) {
  const int n = f.nranks;
  const double s = static_cast<double>(f.bytes);
  const double c = stagedChunk(f, s);
  const double chunks = std::ceil(s / c);
  const bool scatter = f.coll == CollType::ReduceScatter;
  // A compressed wire: the frames' bytes cross PCIe and host memory.
  const double w = wireShare(f.wire);
  const double down = link.down(w * c, w * c, true);
  const double up = scatter ? link.up(w * c / n, w * c / n, true) : link.up(w * c, w * c, true);
  // n - 1 binary sums of c / n bytes per rank, over the threads the host has
  // for them (the cores' rate beyond the caches: inputs stream from memory).
  // Frames instead: each value decoded into the sum n times and the sum
  // encoded once, at the codec's probed cost.
  const double threads =
      std::max(1.0, std::min<double>(n * std::max(1, f.staged.hostSumThreads), m.cores));
  double reduce = (n - 1) * c / (rateAt(m.reduceGBs, c) * 1e9 * threads);
  if (f.wire != WireFormat::Native) {
    const int w = f.wire == WireFormat::Fp8 ? 1 : 0;
    const double values = c / sizeof(float);
    reduce = values * (n * m.wireDecodeNs[w] + m.wireEncodeNs[w]) * 1e-9 / threads;
  }
  const double memory = link.hostMemory((2.0 * n + 1) * w * c);
  CostTerms t;
  // user -> down, ready (seen by the reducers' poll: a hop between host
  // threads), reduced (a host store releasing a stream), consumed; and each
  // rank's enqueue.
  t.latency = 2 * link.flag() + (m.hopLatencyUs + kHostReleaseUs) * kUs;
  t.latency += (f.threadRanks ? n : 1) * (2 + 0.75 * n) * kEnqueueCallUs * kUs;
  // Processes of one GPU: hand-offs between their contexts, 50 us a peer and
  // 25 a peer per chunk (the H200, 2, 4 and 8 processes in time slices, where
  // the staged all-reduce's cost more: the host raises `reduced`). Unlike the
  // staged path's, under MPS too: 2 processes of the H200 took 127-141 us for
  // 8 B-32 KiB where this model without them priced 52, and 1.1-1.7x its
  // price up to 32 MiB (bench/results/planner_h200/mps_p2p_off); with them,
  // 0.85-1.27x. (Thread ranks beside other processes take neither path.)
  const bool processesShareGpu = f.timeSliced || (!f.threadRanks && f.ranksPerGpu > 1);
  if (processesShareGpu) t.latency += (n - 1) * (50 + 25 * chunks) * kUs;
  if (f.wire != WireFormat::Native) t.latency += 2 * link.launch();  // encode, decode
  t.latency *= std::max(1, f.calls);
  // The first chunk passes every stage in turn; each later one adds the slowest.
  t.transfer += down + up;
  t.reduce += reduce;
  const double slowest = std::max({down, up, reduce, memory});
  (slowest == memory   ? t.memory
   : slowest == reduce ? t.reduce
                       : t.transfer) += std::max(0.0, chunks - 1) * slowest;
  return t;
}

CostTerms pairsCost(const CallFacts& f, const GpuLink& link) {
  const double s = static_cast<double>(f.bytes);
  const double c = std::min(static_cast<double>(f.staged.pairChunkBytes), s);
  CostTerms t;
  t.latency = 3 * link.flag();  // user -> down, sent, up -> user (acked frees a slot later)
  // A send and a receive run at once on a rank (a ring of pairs, a pipeline).
  pipeline(std::ceil(s / c), link.down(c, c, true), link.up(c, c, true), 0, &t);
  return t;
}

// LL: ranks write their lines (8 payload bytes in 16) into host memory and
// read the peers' they need. The grid's blocks are loads and stores, not
// copies: no per-copy fixed cost, so lines move at the link's streaming rate
// (that of 1 MiB copies). A GPU's link carries the writes and reads of its
// ranks only: a broadcast's root alone writes, a reduce's root alone reads.
CostTerms llCost(const CallFacts& f, const GpuLink& link) {
  const double lines = 2.0 * static_cast<double>(f.bytes);  // the rank's input, posted
  const double n = f.nranks;
  const int perGpu = link.ranksPerGpu();
  int writers = perGpu;
  int readers = perGpu;
  double read = (n - 1) * lines;  // a reader's: every peer's
  switch (f.coll) {
    case CollType::ReduceScatter:
      read = (n - 1) * lines / n;  // my block of each
      break;
    case CollType::Broadcast:
      writers = 1;
      readers = std::min(perGpu, f.nranks - 1);
      read = lines;  // the root's
      break;
    case CollType::Reduce:
      readers = 1;
      break;
    default:
      break;
  }
  // The peers whose data a rank waits for: the first one's lines take a
  // flag's latency, the others' polls overlap it half-way (measured with 2
  // and 4 ranks on the H200). A broadcast's non-root waits for the root's
  // data and one line of each other peer, read at once: as for two peers.
  const double waitedFor = f.coll == CollType::Broadcast ? std::min(n - 1, 2.0) : n - 1;
  CostTerms t;
  t.latency = link.launch() + link.flag() * (waitedFor + 2) / 2.0;
  const double at = std::max(lines, MachineFacts::curveBytes(4));
  t.transfer = link.down(lines, at, false, writers) + link.up(read, at, false, readers);
  return t;
}

// The simple kernel's loads and stores of host memory move about half what
// the copy engines do (H200, 2 processes under MPS, 1-4 MiB: a broadcast's
// 4 MiB took 174 us against the staged path's 115, whose copies this model
// prices 2 times too slow against its own figures; bench/results/simple_h200).
constexpr double kSimpleLinkShare = 0.5;

// A broadcast's first chunk is not on the critical path of calls run back to
// back: likely because its root waits only for one line of each peer and
// posts the next call's chunks while the non-roots still read this one's.
// H100, 2 processes under MPS: a serial fill priced its 8-512 KiB calls
// 1.10-1.28x too slow (a 128 KiB broadcast took 15.2 us where LL, chosen,
// took 19.3); without it 0.91-0.94x; bench/results/planner_h100/
// mps_p2p_off_87a413c. The other collectives' ranks all read before their
// next call: an all-gather priced so would take the simple kernel at 128 KiB,
// where LL was faster on both machines (H100 17.0 us against 18.0, H200 18.7
// against 21.0); their first chunk stays serial.
constexpr double kSimpleBroadcastFillSerialShare = 0.0;

// Simple: as LL's flows, a payload byte per byte (no flags among the data),
// writer blocks posting while reader blocks read: both ways at once, chunk
// after chunk. A chunk's data is read after its flag: a round trip more than
// LL before the first bytes arrive.
CostTerms simpleCost(const CallFacts& f, const GpuLink& link) {
  const double posted = static_cast<double>(f.bytes);
  const double n = f.nranks;
  const int perGpu = link.ranksPerGpu();
  int writers = perGpu;
  int readers = perGpu;
  double payload = posted;          // a peer's, as the chunks cut it
  double write = posted;            // a posting rank's
  double read = (n - 1) * posted;   // a reading rank's
  double writing = n, reading = n;  // ranks of the host that post and read data
  switch (f.coll) {
    case CollType::ReduceScatter:  // its own block stays on the GPU
      payload = posted / n;
      write = (n - 1) * payload;
      read = (n - 1) * payload;
      break;
    case CollType::Broadcast:
      writers = 1;
      readers = std::min(perGpu, f.nranks - 1);
      read = posted;
      writing = 1;
      reading = n - 1;
      break;
    case CollType::Reduce:  // the root posts nothing
      writers = std::min(perGpu, f.nranks - 1);
      readers = 1;
      writing = n - 1;
      reading = 1;
      break;
    default:
      break;
  }
  const double chunks = std::ceil(payload / static_cast<double>(cuda::kSimpleChunkBytes));
  const double waitedFor = f.coll == CollType::Broadcast ? std::min(n - 1, 2.0) : n - 1;
  CostTerms t;
  t.latency = link.launch() + link.flag() * ((waitedFor + 2) / 2.0 + 1);
  const double at = std::max(write, MachineFacts::curveBytes(4));  // a rank's stream
  // Host memory takes every rank's writes and reads, as the staged path's copies'.
  const double memory = link.hostMemory((writing * write + reading * read) / chunks);
  pipeline(chunks, link.down(write / chunks, at, true, writers) / kSimpleLinkShare,
           link.up(read / chunks, at, true, readers) / kSimpleLinkShare, memory, &t,
           f.coll == CollType::Broadcast ? kSimpleBroadcastFillSerialShare : 1.0);
  return t;
}

// LL send/recv: the sender writes the message's lines, the receiver waits
// on one thread for the last of them and then reads the rest: two PCIe round
// trips after the launch. A rank's send and receive of a group run at once in
// one launch. (H200, 2 processes under MPS: 12.9 us at 8 B, 20.2 at 32 KiB,
// 26.4 at 64 KiB, where the staged pair slots took 19.3, 25.0 and 21.6.)
CostTerms llPairsCost(const CallFacts& f, const GpuLink& link) {
  const double lines = 2.0 * static_cast<double>(f.bytes);
  const double at = std::max(lines, MachineFacts::curveBytes(4));
  CostTerms t;
  t.latency = link.launch() + 2 * link.flag();
  t.transfer = link.down(lines, at, false) + link.up(lines, at, false);
  return t;
}

CostTerms sharedContextCost(const CallFacts& f, const GpuLink& link, const MachineFacts& m) {
  CostTerms t;
  // The last thread to arrive enqueues for all after a host hand-off: a wait
  // on each rank's input, the reduce kernel, a copy and an event per other
  // rank, about 2.5 launches per rank (measured with 2 and 4 ranks on the H200).
  t.latency = 2.5 * f.nranks * kEnqueueCallUs * kUs + m.hopLatencyUs * kUs;
  t.transfer = f.nranks * static_cast<double>(f.bytes) / (kDeviceMemoryGBs * 1e9);
  return t;
}

}  // namespace

CostTerms devicePathCost(DevicePath path, const CallFacts& f, const MachineFacts& m,
                         const CostTerms& hostPart) {
  if (f.nranks <= 1 || f.bytes == 0) return {};
  const GpuLink link(m, f.ranksPerGpu);
  switch (path) {
    case DevicePath::SharedContext:
      return sharedContextCost(f, link, m);
    case DevicePath::Ll:
    case DevicePath::LlThreads:
      return llCost(f, link);
    case DevicePath::Staged:
      return stagedCost(f, link);
    case DevicePath::HostSum:
      return hostSumCost(f, link, m);
    case DevicePath::Pairs:
    case DevicePath::P2pPairs:
      return pairsCost(f, link);
    case DevicePath::LlPairs:
      return llPairsCost(f, link);
    case DevicePath::Simple:
      return simpleCost(f, link);
    case DevicePath::Proxy:
      break;
  }
  return proxyCost(f, link, hostPart);
}

}  // namespace lanes
