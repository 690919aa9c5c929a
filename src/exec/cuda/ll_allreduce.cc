#include "exec/cuda/ll_allreduce.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "base/cuda_check.h"
#include "base/cuda_temp_stream.h"
#include "base/env.h"
#include "base/log.h"
#include "exec/cuda/device_scope.h"
#include "kernels/cuda/ll_pairs.h"
#include "kernels/cuda/simple_collective.h"
#include "transport/common/numa_policy.h"

namespace lanes {
namespace {

// Where the LL kernel can serve this rank set at all: at most kLlMaxRanks,
// every rank on this host (identical on every rank).
bool rankSetServed(CommView comm) {
  if (comm.nranks() > cuda::kLlMaxRanks) return false;
  if (comm.nranks() == 1) return true;
  return comm.hasBootstrap() && comm.allOnOneHost();
}

// LANES_LL_MAX_BYTES (at most kHardMaxBytes), at least a line and rounded up
// to whole lines.
size_t roundedMaxBytes(size_t bytes) {
  bytes = std::max<size_t>(bytes, cuda::kLlLinePayload);
  return (bytes + cuda::kLlLinePayload - 1) / cuda::kLlLinePayload * cuda::kLlLinePayload;
}

// What every rank states before LL is used.
struct Proposal {
  int32_t willing = 0;
  int32_t collectives = 0;  // LANES_PROTO allows the LL collectives (not only its other kernels)
  int32_t pairStreams = 0;  // send/recv kernel blocks a launch may run; 0: no pair slots wanted
  uint64_t maxBytes = 0;
  uint64_t simpleMaxBytes = 0;  // 0: no simple slots wanted
};

// The pair slots of all ordered pairs take at most this much of the arena:
// larger communicators get smaller messages (11 ranks: 64 KiB; 16: 16 KiB;
// 32: 4 KiB; 46 and more: none).
constexpr size_t kPairRegionBudget = size_t{64} << 20;
// Below this the copy-engine pair slots do as well: no LL pair slots.
constexpr size_t kPairMinBytes = size_t{4} << 10;

// The largest LL message for `n` ranks and LL calls of at most `maxBytes`: 0
// where the pair slots would not fit the budget at kPairMinBytes.
size_t pairMaxBytesFor(int n, size_t maxBytes) {
  size_t bytes =
      std::min(maxBytes, cuda::kLlPairMaxBytes) / cuda::kLlLinePayload * cuda::kLlLinePayload;
  while (bytes >= kPairMinBytes && cuda::llPairRegionBytes(n, bytes) > kPairRegionBudget)
    bytes /= 2;
  return bytes >= kPairMinBytes ? bytes : 0;
}

// The kernel's name for a collective the registry gives LL (planner/registry.cc).
cuda::LlCollective llCollective(CollType c) {
  switch (c) {
    case CollType::AllGather:
      return cuda::LlCollective::AllGather;
    case CollType::ReduceScatter:
      return cuda::LlCollective::ReduceScatter;
    case CollType::Broadcast:
      return cuda::LlCollective::Broadcast;
    case CollType::Reduce:
      return cuda::LlCollective::Reduce;
    default:
      return cuda::LlCollective::AllReduce;
  }
}

uint32_t loadWord(const uint32_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
uint64_t loadWord(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

}  // namespace

Status LlAllReduce::setUp(CommView comm) {
  if (!rankSetServed(comm)) return Status::ok();
  std::lock_guard<std::mutex> lock(comm.paths().mutex);
  if (comm.paths().ll) return Status::ok();
  std::unique_ptr<LlAllReduce> ll(new LlAllReduce(comm));
  // Init may run while this thread captures another stream into a CUDA Graph.
  // Setup allocates and registers memory, calls a global-mode capture forbids
  // on this thread and which would invalidate that graph; they touch no
  // captured stream, so relax this thread's capture mode meanwhile (as NCCL does).
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  const bool exchanged = cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess;
  Status s = ll->setup();
  if (exchanged) cudaThreadExchangeStreamCaptureMode(&mode);
  comm.paths().ll = std::move(ll);
  if (!s) comm.fail(s.code(), s.message());
  return s;
}

Status LlAllReduce::createLocalResources() {
  // Stream-ordered on a private stream: no device-wide synchronisation, which
  // with ranks as threads could wait for a peer's kernel that waits for us.
  TempStream stream;
  LANES_CUDA_RETURN(stream.error());
  // The device state, then the copies of in-place sends (ll_pairs.cc).
  void* state = nullptr;
  LANES_CUDA_RETURN(cudaMallocAsync(&state, kStateBytes + kPairScratchBytes, stream.get()));
  state_ = static_cast<cuda::LlDeviceState*>(state);
  pairScratch_ = static_cast<unsigned char*>(state) + kStateBytes;
  LANES_CUDA_RETURN(cudaMemsetAsync(state_, 0, sizeof(cuda::LlDeviceState), stream.get()));
  LANES_CUDA_RETURN(cudaStreamSynchronize(stream.get()));
  void* control = nullptr;
  LANES_CUDA_RETURN(cudaHostAlloc(&control, sizeof(cuda::LlControl),
                                  cudaHostAllocPortable | cudaHostAllocMapped));
  control_ = static_cast<cuda::LlControl*>(control);
  std::memset(control_, 0, sizeof(cuda::LlControl));
  void* controlDevice = nullptr;
  LANES_CUDA_RETURN(cudaHostGetDevicePointer(&controlDevice, control, 0));
  controlDevice_ = static_cast<cuda::LlControl*>(controlDevice);
  LANES_CUDA_RETURN(cudaEventCreateWithFlags(&last_, cudaEventDisableTiming));
  // Every block of every rank on this GPU must be resident at once (the
  // kernel's blocks spin for their peers): this rank takes its share of what
  // the GPU holds, halved to leave room for other kernels and communicators.
  int sms = 1, perSm = 1;
  LANES_CUDA_RETURN(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, comm_.cudaDev()));
  LANES_CUDA_RETURN(static_cast<cudaError_t>(cuda::llResidentBlocksPerSm(&perSm)));
  maxBlocks_ = std::max(1, sms * perSm / std::max(1, comm_.ranksPerGpu()) / 2);
  LANES_CUDA_RETURN(static_cast<cudaError_t>(cuda::llPairResidentBlocksPerSm(&perSm)));
  pairMaxStreams_ = std::max(1, sms * perSm / std::max(1, comm_.ranksPerGpu()) / 2);
  LANES_CUDA_RETURN(static_cast<cudaError_t>(cuda::simpleResidentBlocksPerSm(&perSm)));
  simpleMaxBlocks_ = std::max(1, sms * perSm / std::max(1, comm_.ranksPerGpu()) / 2);
  return Status::ok();
}

void LlAllReduce::releaseLocalResources() {
  if (last_ != nullptr) cudaEventDestroy(last_);
  if (state_ != nullptr) {
    TempStream stream;
    if (stream.error() == cudaSuccess)
      cudaFreeAsync(state_, stream.get());
    else
      cudaFree(state_);
  }
  if (control_ != nullptr) cudaFreeHost(control_);
  last_ = nullptr;
  state_ = nullptr;
  pairScratch_ = nullptr;
  control_ = controlDevice_ = nullptr;
  cudaGetLastError();  // nothing here may leave a sticky-looking error behind
}

Status LlAllReduce::createArena(Deadline deadline, bool* fatal) {
  const int n = comm_.nranks();
  char tag[32];
  snprintf(tag, sizeof(tag), "lanes-%016llx", static_cast<unsigned long long>(comm_.commId()));
  const size_t rankBytes = 2 * slotBytes_;
  pairRegion_ = (static_cast<size_t>(n) * rankBytes + 4095) / 4096 * 4096;
  const size_t pairBytes = pairMaxBytes_ > 0 ? cuda::llPairRegionBytes(n, pairMaxBytes_) : 0;
  simpleRegion_ = (pairRegion_ + pairBytes + 4095) / 4096 * 4096;
  const size_t simpleRankBytes = 2 * simpleSlotBytes_;
  const size_t bytes = simpleRegion_ + static_cast<size_t>(n) * simpleRankBytes;
  // Each rank's lines on its GPU's NUMA node (its pair slots as a sender
  // too); a range shorter than a page shares pages with its neighbours,
  // and a page goes to the rank owning its first byte.
  const std::vector<int> rankNodes = comm_.rankNumaNodes();
  HostArenaSpec spec;
  spec.name = "/" + std::string(tag) + "-ll";
  spec.what = "small-message arena";
  spec.bytes = bytes;
  std::vector<NumaRange> wanted;
  for (size_t r = 0; r < rankNodes.size(); ++r)
    wanted.push_back({r * rankBytes, rankBytes, rankNodes[r]});
  const size_t senderBytes = pairMaxBytes_ > 0 ? static_cast<size_t>(n) * cuda::kLlPairDepth *
                                                     cuda::llPairSlotBytes(pairMaxBytes_)
                                               : 0;
  for (size_t r = 0; r < rankNodes.size() && senderBytes > 0; ++r)
    wanted.push_back({pairRegion_ + r * senderBytes, senderBytes, rankNodes[r]});
  for (size_t r = 0; r < rankNodes.size() && simpleRankBytes > 0; ++r)
    wanted.push_back({simpleRegion_ + r * simpleRankBytes, simpleRankBytes, rankNodes[r]});
  spec.placement = pageAlignedRanges(std::move(wanted), bytes, 4096);
  spec.placed = describeRankNodes(rankNodes, "lines");
  return HostArena::create(comm_.bootstrap(), spec, deadline, &arena_, fatal);
}

Status LlAllReduce::setup() {
  DeviceScope device(comm_.cudaDev());
  const int n = comm_.nranks();
  std::string why;
  bool expected = false;  // off by choice or by the placement: INFO, not WARN
  Status local;
  const DevicePath llPath =
      comm_.someProcessHoldsSeveralRanks() ? DevicePath::LlThreads : DevicePath::Ll;
  // For processes the arena also carries the pair slots and the simple
  // kernel's: any of the three makes it worth setting up.
  const bool anyAllowed =
      pathAllowed(comm_.selection(), llPath) ||
      (llPath == DevicePath::Ll && (pathAllowed(comm_.selection(), DevicePath::LlPairs) ||
                                    pathAllowed(comm_.selection(), DevicePath::Simple)));
  if (!anyAllowed) {
    const NameList& proto = comm_.selection().proto;
    const std::string left =
        llPath == DevicePath::Ll ? "ll, ll_pairs and simple" : devicePathName(llPath);
    why = proto.set() ? "LANES_PROTO=" + proto.text() + " leaves out " + left
                      : left + " is off unless LANES_PROTO names it";
    expected = true;
  } else if (n > 1 && comm_.processesTimeSliceGpu() && !comm_.selection().llSharedGpu) {
    // Their kernels meet only at time-slice switches, a thousand times slower
    // than threads of one context (docs/gpu_data_path.md has the figures).
    // Under MPS they run side by side, and the GPU does not time-slice.
    why =
        "ranks of different processes share a GPU without MPS, whose time slices would stall "
        "the kernel (LANES_LL_SHARED_GPU=1 uses it anyway)";
    expected = true;
  } else {
    local = createLocalResources();
    if (!local) {
      why = local.message();
      cudaGetLastError();
    }
  }
  const size_t mine = roundedMaxBytes(comm_.selection().llMaxBytes);

  if (n > 1) {
    // 1. Every rank must be able to; the smallest LANES_LL_MAX_BYTES wins.
    Deadline deadline = comm_.deadline();
    std::vector<Proposal> all(static_cast<size_t>(n));
    all[static_cast<size_t>(comm_.rank())].willing = why.empty() ? 1 : 0;
    all[static_cast<size_t>(comm_.rank())].collectives =
        pathAllowed(comm_.selection(), llPath) ? 1 : 0;
    all[static_cast<size_t>(comm_.rank())].maxBytes = mine;
    // Sends and receives of thread ranks stay off LL, as their collectives
    // do unless LANES_PROTO names ll_threads.
    const bool pairsWanted =
        llPath == DevicePath::Ll && pathAllowed(comm_.selection(), DevicePath::LlPairs);
    all[static_cast<size_t>(comm_.rank())].pairStreams = pairsWanted ? pairMaxStreams_ : 0;
    // The simple kernel, as LL, for processes only; it needs a writer and a reader block.
    const bool simpleWanted = llPath == DevicePath::Ll &&
                              pathAllowed(comm_.selection(), DevicePath::Simple) &&
                              simpleMaxBlocks_ >= 2;
    all[static_cast<size_t>(comm_.rank())].simpleMaxBytes =
        simpleWanted ? comm_.selection().simpleMaxBytes : 0;
    LANES_RETURN_IF_ERROR(comm_.bootstrap().allGather(all.data(), sizeof(Proposal), deadline));
    maxBytes_ = mine;
    int pairStreams = cuda::kLlPairMaxStreams;
    llCollectives_ = true;
    size_t simpleBytes = SelectionConfig::kSimpleHardMaxBytes;
    for (int r = 0; r < n; ++r) {
      const Proposal& p = all[static_cast<size_t>(r)];
      maxBytes_ = std::min<size_t>(maxBytes_, p.maxBytes);
      simpleBytes = std::min<size_t>(simpleBytes, p.simpleMaxBytes);
      // A rank that leaves LL out would take another path for a call its
      // peers' kernels wait for on LL: LL collectives for all or none.
      llCollectives_ = llCollectives_ && p.collectives != 0;
      pairStreams = std::min(pairStreams, p.pairStreams);
      if (!p.willing && why.empty())
        why = "rank " + std::to_string(r) + " cannot use it (its log says why)";
    }
    slotBytes_ = cuda::llSlotBytes(maxBytes_);
    // Pair slots where every rank wants them and a launch can hold a send
    // and a receive stream per peer on every rank's GPU at once.
    pairMaxStreams_ = pairStreams;
    pairMaxBytes_ = pairStreams >= 2 * (n - 1) ? pairMaxBytesFor(n, maxBytes_) : 0;
    simpleMaxBytes_ = cuda::simpleMaxBytesFor(n, simpleBytes);
    simpleFlagBytes_ = simpleMaxBytes_ > 0 ? cuda::simpleFlagBytes(simpleMaxBytes_, n) : 0;
    simpleSlotBytes_ = simpleMaxBytes_ > 0 ? cuda::simpleSlotBytes(simpleMaxBytes_, n) : 0;

    // 2. The shared slots (collective; on failure every rank falls back alike:
    // first without the simple slots, the bulk of the arena, then without LL).
    if (why.empty()) {
      bool fatal = false;
      Status s = createArena(deadline, &fatal);
      if (!s && !fatal && simpleMaxBytes_ > 0) {
        LANES_WARN(Init, comm_.rank(),
                   "mid-size device collectives: no room for the simple kernel's %zu-byte "
                   "slots (%s); going on without them (a smaller LANES_SIMPLE_MAX_BYTES, or "
                   "more /dev/shm, keeps them)",
                   simpleMaxBytes_, s.message().c_str());
        simpleMaxBytes_ = simpleFlagBytes_ = simpleSlotBytes_ = 0;
        s = createArena(deadline, &fatal);
      }
      if (fatal) return s;
      if (!s) why = s.message();
    }
  } else {
    maxBytes_ = mine;
    llCollectives_ = pathAllowed(comm_.selection(), llPath);
    // One rank copies locally on the simple kernel too, at any size.
    if (pathAllowed(comm_.selection(), DevicePath::Simple) && simpleMaxBlocks_ >= 2)
      simpleMaxBytes_ = comm_.selection().simpleMaxBytes;
  }

  if (!why.empty()) {
    releaseLocalResources();
    arena_.reset();
    if (expected)
      LANES_INFO(Init, comm_.rank(), "small device collectives: LL kernel path off (%s)",
                 why.c_str());
    else
      LANES_WARN(Init, comm_.rank(), "small device collectives: the LL kernel path is off (%s)",
                 why.c_str());
    return Status::ok();
  }

  // 3. Failure handling: a failed communicator sets the abort word.
  hookIndex_ = comm_.addFailureHook([control = control_](const std::string&) {
    __atomic_store_n(&control->abort, 1u, __ATOMIC_RELEASE);
  });
  if (n > 1) monitor_ = std::thread([this] { monitor(); });
  enabled_ = true;
  if (llCollectives_)
    LANES_INFO(Init, comm_.rank(),
               "small device collectives: one LL kernel through mapped host memory, up to %zu "
               "bytes",
               maxBytes_);
  else
    LANES_INFO(Init, comm_.rank(),
               "small device collectives: LL off (LANES_PROTO leaves out %s on some rank); its "
               "arena serves the kernels below",
               devicePathName(llPath));
  if (pairMaxBytes_ > 0)
    LANES_INFO(Init, comm_.rank(),
               "small device send/recv: LL pair slots, %d x %zu bytes per ordered pair of ranks",
               cuda::kLlPairDepth, pairMaxBytes_);
  if (simpleMaxBytes_ > 0)
    LANES_INFO(Init, comm_.rank(),
               "mid-size device collectives: the simple kernel through mapped host memory, up "
               "to %zu bytes posted per rank",
               simpleMaxBytes_);
  return Status::ok();
}

void LlAllReduce::setAbort() {
  if (control_ != nullptr) __atomic_store_n(&control_->abort, 1u, __ATOMIC_RELEASE);
}

Status LlAllReduce::checkKernels() {
  const uint32_t error = loadWord(&control_->error);
  if (error == cuda::kLlOk) return Status::ok();
  Status failed = comm_.checkAbort();
  if (!failed) return failed;  // the communicator failed first: that is the cause
  const auto peer = static_cast<int>(loadWord(&control_->peer));
  const auto seq = static_cast<unsigned long long>(loadWord(&control_->seq));
  Status s;
  char text[640];
  const double waited = comm_.timeoutSeconds();
  const std::string on = comm_.describe();
  if (error == cuda::kLlTimedOut || error == cuda::kSimpleTimedOut) {
    const bool simple = error == cuda::kSimpleTimedOut;
    snprintf(text, sizeof(text),
             "%s device collective #%llu (%s kernel) on %s waited %.0f s for rank %d's data "
             "and gave up: rank %d did not make the same call (check that every rank issues the "
             "same collectives in the same order) or its GPU stream is stuck; destroy the "
             "communicator",
             simple ? "mid-size" : "small", seq, simple ? "simple" : "LL", on.c_str(), waited, peer,
             peer);
    s = timeoutError(text);
  } else if (error == cuda::kLlSendTimedOut) {
    snprintf(text, sizeof(text),
             "device send #%llu to rank %d (LL pair slots) on %s waited %.0f s for rank %d to "
             "receive send #%llu and gave up: rank %d did not post the matching lanesRecv (sends "
             "and receives between two ranks pair up in the order they are made) or its GPU "
             "stream is stuck; destroy the communicator",
             seq, peer, on.c_str(), waited, peer, seq - cuda::kLlPairDepth, peer);
    s = timeoutError(text);
  } else if (error == cuda::kLlReceiveTimedOut) {
    snprintf(text, sizeof(text),
             "device receive #%llu from rank %d (LL pair slots) on %s waited %.0f s for rank "
             "%d's data and gave up: rank %d did not make the matching lanesSend (in the same "
             "order, with the same count) or its GPU stream is stuck; destroy the "
             "communicator",
             seq, peer, on.c_str(), waited, peer, peer);
    s = timeoutError(text);
  } else {
    s = Status(lanesInternalError, "small device call #" + std::to_string(seq) + " on " + on +
                                       " was stopped by an abort; destroy the communicator");
  }
  comm_.fail(s.code(), s.message());
  return s;
}

void LlAllReduce::monitor() {
  std::unique_lock<std::mutex> lock(monitorMutex_);
  while (!stop_) {
    monitorWake_.wait_for(lock, std::chrono::milliseconds(50));
    if (stop_) break;
    if (loadWord(&control_->error) == cuda::kLlOk) continue;
    lock.unlock();
    (void)checkKernels();  // records the failure for lanesCommGetAsyncError
    lock.lock();
    break;  // reported: nothing more to watch
  }
}

Status LlAllReduce::orderAfterLast(cudaStream_t stream, bool* capturing) {
  LANES_RETURN_IF_ERROR(checkKernels());
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  LANES_CUDA_RETURN(cudaStreamIsCapturing(stream, &capture));
  *capturing = capture != cudaStreamCaptureStatusNone;
  // LL launches of one rank must not overlap (they share the slots and the
  // counters): a launch on another stream waits for the previous one.
  // Inside a capture the graph's own order applies (an event recorded outside
  // the capture cannot be waited on in it).
  if (!*capturing && lastStream_ != nullptr && lastStream_ != stream)
    LANES_CUDA_RETURN(cudaStreamWaitEvent(stream, last_, 0));
  return Status::ok();
}

Status LlAllReduce::noteLaunch(int rc, cudaStream_t stream, bool capturing, const char* what) {
  if (rc != cudaSuccess) {
    Status s = kernelStatus(rc, (std::string("launching the ") + what).c_str());
    // The peers' kernels will wait for this rank's lines: fail (they time out
    // or learn of it through the bootstrap).
    comm_.fail(s.code(), "small device call on " + comm_.describe() + ": " + s.message());
    return s;
  }
  if (!capturing) {
    LANES_CUDA_RETURN(cudaEventRecord(last_, stream));
    lastStream_ = stream;
  }
  return Status::ok();
}

unsigned long long LlAllReduce::kernelTimeoutNs() const {
  const double ns = comm_.timeoutSeconds() * 1e9;
  // Saturated well below 2^64 - %globaltimer (ns since 1970, ~2^61 today).
  return static_cast<unsigned long long>(std::clamp(ns, 1.0, 8e18));
}

cuda::LlAllReduceArgs LlAllReduce::argsOf(const Request& r) const {
  cuda::LlAllReduceArgs a;
  a.coll = llCollective(r.args.coll);
  a.root = r.args.root;
  a.send = r.args.send;
  a.recv = r.args.recv;
  a.count = r.args.count;
  a.type = r.args.type;
  a.op = r.op.kind;
  a.premulScalar = r.op.scalar;
  a.rank = comm_.rank();
  a.nranks = comm_.nranks();
  a.slots = arena_ ? arena_->device() : nullptr;
  a.slotBytes = slotBytes_;
  a.state = state_;
  a.control = controlDevice_;
  a.timeoutNs = kernelTimeoutNs();
  a.maxBlocks = maxBlocks_;
  return a;
}

Status LlAllReduce::enqueue(const Request& r, cudaStream_t stream) {
  DeviceScope device(comm_.cudaDev());
  bool capturing = false;
  LANES_RETURN_IF_ERROR(orderAfterLast(stream, &capturing));
  const cuda::LlAllReduceArgs a = argsOf(r);
  LANES_RETURN_IF_ERROR(
      noteLaunch(cuda::launchLlAllReduce(a, stream), stream, capturing, "LL kernel"));
  ++calls_[static_cast<size_t>(r.args.coll)];
  return Status::ok();
}

bool LlAllReduce::waitIdle(Deadline deadline) {
  Backoff backoff;
  for (;;) {
    const bool eventDone = lastStream_ == nullptr || cudaEventQuery(last_) != cudaErrorNotReady;
    const bool kernelsDone = loadWord(&control_->entered) == loadWord(&control_->exited) &&
                             loadWord(&control_->pairEntered) == loadWord(&control_->pairExited);
    if (eventDone && kernelsDone) return true;
    if (deadline.expired()) return false;
    backoff.pause();
  }
}

LlAllReduce::~LlAllReduce() {
  if (monitor_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(monitorMutex_);
      stop_ = true;
    }
    monitorWake_.notify_all();
    monitor_.join();
  }
  if (!enabled_) {  // no kernel was ever launched
    releaseLocalResources();
    return;
  }
  DeviceScope device(comm_.cudaDev());
  const bool failed = comm_.failed();
  if (failed) setAbort();
  bool idle = waitIdle(comm_.deadline());
  if (!idle && !failed) {
    LANES_WARN(Init, comm_.rank(),
               "destroying the communicator while a small device collective still waits for "
               "peers after %.0f s; stopping it (its result is undefined)",
               comm_.timeoutSeconds());
    setAbort();
    idle = waitIdle(Deadline::after(10));
  }
  comm_.removeFailureHook(hookIndex_);
  cudaGetLastError();
  if (!idle) {
    LANES_WARN(Init, comm_.rank(),
               "an LL all-reduce kernel still runs; leaking its memory rather than freeing "
               "memory the GPU may touch");
    if (arena_) arena_->leak();
    return;
  }
  releaseLocalResources();
}

}  // namespace lanes
