// A communicator's device paths as a set: made at init, described to the
// chooser as facts (call_facts.h), and a batch of device-buffer calls handed
// to the one the chooser picks. The choice itself is the planner's
// (planner/registry.h); nothing here ranks one path above another.
#include <algorithm>

#include "base/cuda_check.h"
#include "base/log.h"
#include "exec/comm_config.h"
#include "exec/comm_view.h"
#include "exec/cuda/context_allreduce.h"
#include "exec/cuda/device_proxy.h"
#include "exec/cuda/device_scope.h"
#include "exec/cuda/ll_allreduce.h"
#include "exec/cuda/staged_collectives.h"
#include "exec/cuda/stream_join.h"
#include "exec/device_path.h"
#include "kernels/cuda/ll_allreduce.h"
#include "kernels/cuda/ll_pairs.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/simple_collective.h"
#include "kernels/cuda/stream_flags.h"
#include "kernels/cuda/wire_codec.h"
#include "observe/nvtx_ranges.h"

namespace lanes {
namespace {

// One rank, in place: the result already is the input (PreMulSum, which
// scales it, aside), so nothing goes on the stream; NCCL returns at once too.
bool singleRankNoOp(const Request& r) {
  if (r.isP2p || r.args.nranks != 1 || r.args.send != r.args.recv) return false;
  return !(isReduction(r.args.coll) && r.op.kind == RedOpKind::PreMulSum);
}

bool holdsP2p(const std::vector<Request>& requests) {
  return std::any_of(requests.begin(), requests.end(), [](const Request& r) { return r.isP2p; });
}

// The rank set and the paths as set up; the caller holds the paths' mutex.
CallFacts rankSetFacts(CommView comm) {
  CallFacts f;
  f.device = true;
  f.nranks = comm.nranks();
  f.oneHost = comm.allOnOneHost();
  f.ranksPerGpu = comm.ranksPerGpu();
  f.threadRanks = comm.someProcessHoldsSeveralRanks();
  f.threadsBesideProcesses = comm.threadsBesideProcesses();
  f.timeSliced = comm.processesTimeSliceGpu();
  DevicePaths& paths = comm.paths();
  if (auto* shared = static_cast<ContextAllReduce*>(paths.sharedContext.get()))
    f.sharedContext = {true, shared->maxBytes()};
  if (auto* ll = static_cast<LlAllReduce*>(paths.ll.get()); ll != nullptr && ll->enabled()) {
    if (ll->collectivesEnabled()) f.ll = {true, ll->maxBytes()};
    if (ll->simpleEnabled()) f.simple = {true, ll->simpleMaxBytes()};
    if (ll->pairsEnabled()) f.llPairs = {true, ll->pairMaxBytes()};
  }
  if (auto* staged = static_cast<StagedCollectives*>(paths.staged.get());
      staged != nullptr && staged->enabled()) {
    const StageArenaConfig& arena = comm.config().stage;
    f.staged.ready = true;
    f.staged.inGpuMemory = staged->usesP2p();
    f.staged.hostSumThreads = staged->hostSumThreads();
    f.staged.gatherScatter = staged->servesGatherScatter();
    f.staged.proxyUpToBytes = staged->proxyUpToBytes();
    f.staged.slotBytes = arena.chunkBytes;
    if (arena.pairChunkBytes > 0) f.staged.pairChunkBytes = arena.pairChunkBytes;
    f.pairs = {staged->hasPairSlots(), staged->pairsUseP2p()};
  }
  return f;
}

// The facts of `requests` and of the paths as set up, the same on every rank:
// sizes come from the counts (a broadcast's non-roots send nothing).
CallFacts factsOf(CommView comm, const std::vector<Request>& requests) {
  CallFacts f;
  {
    DevicePaths& paths = comm.paths();
    std::lock_guard<std::mutex> lock(paths.mutex);
    f = paths.settled ? paths.settledFacts : rankSetFacts(comm);
  }
  f.calls = 0;
  bool first = true;
  bool floatSums = comm.selection().wire != WireFormat::Native;
  for (const Request& r : requests) {
    const RedOpKind op = r.op.kind;
    floatSums = floatSums && !r.isP2p && r.args.type == lanesFloat32 &&
                (op == RedOpKind::Sum || op == RedOpKind::Avg || op == RedOpKind::PreMulSum);
    f.bytes += (r.isP2p ? r.args.count : inputCount(r.args)) * datatypeSize(r.args.type);
    if (r.isP2p) {
      f.p2p = true;
      ++f.p2pCalls;
      f.p2pSelf = f.p2pSelf || r.peer == comm.rank();
      continue;
    }
    if (first) f.coll = r.args.coll;
    f.sameColl = f.sameColl && r.args.coll == f.coll;
    first = false;
    ++f.calls;
  }
  if (floatSums) f.wire = comm.selection().wire;
  return f;
}

// What ran, per call, for the PLAN log and the perf tools.
void notePlans(CommView comm, const std::vector<Request>& requests, DevicePath path,
               const PathChooser& chooser) {
  for (const Request& r : requests) {
    std::string plan = devicePathName(path);
    if (path == DevicePath::Proxy) {
      CallFacts one;
      one.coll = r.args.coll;
      one.p2p = r.isP2p;
      one.bytes = inputCount(r.args) * datatypeSize(r.args.type);
      one.nranks = comm.nranks();
      plan = r.isP2p ? "proxy/p2p"
                     : "proxy/" + std::string(algoName(chooser.hostAlgo(one, comm.selection())));
    }
    comm.notePlan(r.isP2p ? (r.isSend ? "send" : "recv") : collTypeName(r.args.coll), plan,
                  r.sendBytes);
  }
}

// The sends and receives the chooser puts on the staged path's pair slots,
// taken out of `requests`, and those it puts on the LL pair slots (*llPairs).
// Each is decided alone, on facts both of its ends share, so both take the
// same path; *path says which staged pair slots.
std::vector<Request> takePairs(CommView comm, std::vector<Request>& requests,
                               const PathChooser& chooser, DevicePath* path,
                               std::vector<Request>* llPairs) {
  std::vector<Request> pairs, rest;
  for (Request& r : requests) {
    DevicePath p = DevicePath::Proxy;
    if (r.isP2p) {
      const CallFacts facts = factsOf(comm, {r});
      p = chooser.devicePath(r.comm, facts);
      chooser.explainDevice(r.comm, facts);
    }
    if (p == DevicePath::Pairs || p == DevicePath::P2pPairs) {
      *path = p;
      pairs.push_back(std::move(r));
    } else if (p == DevicePath::LlPairs) {
      llPairs->push_back(std::move(r));
    } else {
      rest.push_back(std::move(r));
    }
  }
  requests = std::move(rest);
  return pairs;
}

// A receive on the LL pair slots writes before any other part of the group
// runs (its kernel goes first): it must not overwrite what another part's
// send reads.
Status checkLlReceivesAgainstOtherSends(const std::vector<Request>& llPairs,
                                        const std::vector<Request>& others) {
  for (const Request& r : llPairs) {
    if (r.isSend || r.bytes == 0) continue;
    const auto* r0 = static_cast<const std::byte*>(r.recvbuf);
    for (const Request& s : others) {
      if (!s.isP2p || !s.isSend || s.bytes == 0) continue;
      const auto* s0 = static_cast<const std::byte*>(s.sendbuf);
      if (r0 < s0 + s.bytes && s0 < r0 + r.bytes)
        return invalidUsage(
            "a device receive of " + std::to_string(r.bytes) + " bytes from rank " +
            std::to_string(r.peer) + " overlaps the buffer of a send of " +
            std::to_string(s.bytes) + " bytes to rank " + std::to_string(s.peer) +
            " in the same group, and the two take different paths (the receive the LL pair "
            "slots, which run first). Use separate buffers, the same count both ways, or "
            "LANES_PROTO=^ll_pairs");
    }
  }
  return Status::ok();
}

// The path the chooser picked for one batch of the group, and its bytes.
struct ChosenPath {
  DevicePath path = DevicePath::Proxy;
  uint64_t bytes = 0;
};

// Picks, explains and notes one batch's path: every batch of a group is
// planned before any is enqueued, so the call's NVTX range names them all.
ChosenPath choosePath(const std::vector<Request>& requests, const PathChooser& chooser) {
  if (requests.empty()) return {};
  const CommView comm(requests.front().comm);
  const CallFacts facts = factsOf(comm, requests);
  const DevicePath path = chooser.devicePath(requests.front().comm, facts);
  chooser.explainDevice(requests.front().comm, facts);
  notePlans(comm, requests, path, chooser);
  return {path, facts.bytes};
}

// One batch of the group, on the path chosen for it.
Status enqueueOnPath(std::vector<Request>& requests, cudaStream_t stream, ChosenPath chosen) {
  const CommView comm(requests.front().comm);
  const DevicePath path = chosen.path;
  NvtxRange enqueueRange;
  if (nvtxAttached())
    enqueueRange.push(std::string("enqueue ") + devicePathName(path), chosen.bytes);
  DevicePaths& paths = comm.paths();
  switch (path) {
    case DevicePath::SharedContext:
      return static_cast<ContextAllReduce*>(paths.sharedContext.get())
          ->enqueue(requests.front(), stream);
    case DevicePath::Ll:
    case DevicePath::LlThreads:
      return static_cast<LlAllReduce*>(paths.ll.get())->enqueue(requests.front(), stream);
    case DevicePath::LlPairs:
      return static_cast<LlAllReduce*>(paths.ll.get())->enqueuePairs(requests, stream);
    case DevicePath::Simple:
      return static_cast<LlAllReduce*>(paths.ll.get())->enqueueSimple(requests.front(), stream);
    case DevicePath::Staged:
    case DevicePath::HostSum:
    case DevicePath::Pairs:
    case DevicePath::P2pPairs:
      return static_cast<StagedCollectives*>(paths.staged.get())
          ->enqueue(requests, stream, path == DevicePath::HostSum);
    case DevicePath::Proxy:
      break;
  }
  // Before any other CUDA call of the proxy: under global capture mode even
  // a query could invalidate the caller's capture.
  LANES_RETURN_IF_ERROR(refuseCapture(
      stream,
      "capturing this Lanes call on device buffers into a CUDA Graph is refused: the "
      "host-staged proxy path orders each call by a sequence number written into the stream, "
      "and a graph replay would repeat the captured number instead of taking a new one. Issue "
      "the call outside the capture (small collectives, which take the LL "
      "kernel, can be captured)."));
  DeviceProxy* proxy = nullptr;
  LANES_RETURN_IF_ERROR(DeviceProxy::of(comm, &proxy));
  return proxy->enqueue(requests, stream);
}

}  // namespace

Status enqueueDeviceRequests(std::vector<Request>& requests, cudaStream_t stream,
                             const PathChooser& chooser, const std::function<void()>& planned) {
  if (std::erase_if(requests, singleRankNoOp) > 0) {
    if (requests.empty()) return Status::ok();
    // `stream` was the first request's; the paths below take it as the
    // stream the batch runs on (LL launches on it alone).
    stream = requests.front().stream;
  }
  const CommView comm(requests.front().comm);
  // Before takePairs takes requests out: the split below joins every stream.
  const std::vector<cudaStream_t> others = otherStreams(requests, stream);

  // Sends and receives between ranks of one host: the LL pair slots
  // (ll_pairs.cc) and the pair slots of the host-staged path (staged_sendrecv.cc).
  DevicePath pairsPath = DevicePath::Proxy;
  std::vector<Request> llPairs;
  std::vector<Request> pairs = takePairs(comm, requests, chooser, &pairsPath, &llPairs);
  StagedCollectives* pairPath = nullptr;
  LlAllReduce* llPairPath = nullptr;
  if (!pairs.empty() || !llPairs.empty()) {
    std::lock_guard<std::mutex> lock(comm.paths().mutex);
    if (!pairs.empty()) pairPath = static_cast<StagedCollectives*>(comm.paths().staged.get());
    if (!llPairs.empty()) llPairPath = static_cast<LlAllReduce*>(comm.paths().ll.get());
  }
  if (llPairPath != nullptr) {
    LANES_RETURN_IF_ERROR(checkLlReceivesAgainstOtherSends(llPairs, pairs));
    LANES_RETURN_IF_ERROR(checkLlReceivesAgainstOtherSends(llPairs, requests));
  }
  if (pairPath != nullptr) notePlans(comm, pairs, pairsPath, chooser);
  if (llPairPath != nullptr) notePlans(comm, llPairs, DevicePath::LlPairs, chooser);
  // Sends and receives left (to itself, small ones between processes on one
  // GPU, ranks of other hosts) beside collectives that a GPU-driven path
  // takes: they go to the proxy on their own, or they would turn those
  // collectives away from the path of the ranks whose groups hold none.
  // (Where the collectives go to the proxy anyway, the group stays one batch:
  // the host engine runs it as one group.)
  std::vector<Request> leftover;
  if (holdsP2p(requests) &&
      !std::all_of(requests.begin(), requests.end(), [](const Request& r) { return r.isP2p; })) {
    std::vector<Request> collectives;
    for (const Request& r : requests) (r.isP2p ? leftover : collectives).push_back(r);
    const DevicePath path = chooser.devicePath(requests.front().comm, factsOf(comm, collectives));
    if (path != DevicePath::Proxy)
      requests = std::move(collectives);
    else
      leftover.clear();
  }
  if (pairPath == nullptr && llPairPath == nullptr && leftover.empty()) {
    const ChosenPath chosen = choosePath(requests, chooser);
    if (planned) planned();
    return enqueueOnPath(requests, stream, chosen);
  }

  // A split group: every part runs on `stream`, which the group's other
  // streams join first and wait for after (NCCL completes a group on all of
  // its streams).
  DeviceScope device(comm.cudaDev());
  LANES_RETURN_IF_ERROR(joinStreams(stream, others));
  for (std::vector<Request>* part : {&llPairs, &pairs, &requests, &leftover})
    for (Request& r : *part) r.stream = stream;
  const ChosenPath collectivesPath = choosePath(requests, chooser);
  const ChosenPath leftoverPath = choosePath(leftover, chooser);
  if (planned) planned();
  // The LL kernel first: its sends never wait for this group's receives, so
  // the peers' LL receives complete whatever their streams hold after.
  if (llPairPath != nullptr) LANES_RETURN_IF_ERROR(llPairPath->enqueuePairs(llPairs, stream));
  if (pairPath != nullptr) LANES_RETURN_IF_ERROR(pairPath->enqueue(pairs, stream));
  if (!requests.empty()) LANES_RETURN_IF_ERROR(enqueueOnPath(requests, stream, collectivesPath));
  if (!leftover.empty()) LANES_RETURN_IF_ERROR(enqueueOnPath(leftover, stream, leftoverPath));
  return forkStreams(stream, others);
}

bool streamIsPerThread(cudaStream_t stream) { return stream == cudaStreamPerThread; }

// Setting a path up allocates and registers memory, and those CUDA calls may
// wait for the whole device. Made lazily, inside a later call, they could
// wait for a Lanes kernel that waits for a peer thread of this process that
// the same CUDA lock holds up: a deadlock. At init nothing of Lanes is in
// flight, so every path is made then, on every rank alike.
Status setupProxyPath(lanesComm* handle) {
  const CommView comm(handle);
  DeviceScope guard(comm.cudaDev());
  // Lazy module loading would load each kernel at its first launch, inside a
  // call, where loading can wait for streams parked on peers (reduce.h).
  LANES_CUDA_RETURN(static_cast<cudaError_t>(cuda::preloadReduceKernels()));
  LANES_CUDA_RETURN(static_cast<cudaError_t>(cuda::preloadLlKernels()));
  LANES_CUDA_RETURN(static_cast<cudaError_t>(cuda::preloadSimpleKernels()));
  LANES_CUDA_RETURN(static_cast<cudaError_t>(cuda::preloadLlPairKernels()));
  LANES_CUDA_RETURN(static_cast<cudaError_t>(cuda::preloadFlagKernels()));
  LANES_CUDA_RETURN(static_cast<cudaError_t>(cuda::preloadWireKernels()));
  LANES_RETURN_IF_ERROR(setUpWorkMarkers(handle));
  DeviceProxy* proxy = nullptr;
  LANES_RETURN_IF_ERROR(DeviceProxy::of(comm, &proxy));
  return proxy->prewarm();
}

Status setupSharedContextPath(lanesComm* handle) {
  const CommView comm(handle);
  DeviceScope guard(comm.cudaDev());
  std::unique_ptr<ContextAllReduce> shared;
  LANES_RETURN_IF_ERROR(ContextAllReduce::create(comm, &shared));
  std::lock_guard<std::mutex> lock(comm.paths().mutex);
  comm.paths().sharedContext = std::move(shared);
  return Status::ok();
}

Status setupLlPath(lanesComm* handle) {
  const CommView comm(handle);
  DeviceScope guard(comm.cudaDev());
  return LlAllReduce::setUp(comm);
}

Status setupStagedPath(lanesComm* handle) {
  const CommView comm(handle);
  DeviceScope guard(comm.cudaDev());
  return StagedCollectives::setUp(comm);
}

void settleDevicePaths(lanesComm* handle) {
  const CommView comm(handle);
  std::lock_guard<std::mutex> lock(comm.paths().mutex);
  comm.paths().settledFacts = rankSetFacts(comm);
  comm.paths().settled = true;
}

}  // namespace lanes
