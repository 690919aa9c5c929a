#include "exec/cuda/device_proxy.h"

#include <algorithm>

#include "base/cuda_check.h"
#include "base/deadline.h"
#include "base/env.h"
#include "base/log.h"
#include "core/comm.h"
#include "exec/cuda/context_allreduce.h"
#include "exec/cuda/device_scope.h"
#include "exec/cuda/ll_allreduce.h"
#include "exec/cuda/staged_collectives.h"
#include "exec/cuda/stream_join.h"
#include "kernels/cuda/ll_allreduce.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/stream_flags.h"

namespace lanes {
namespace {

constexpr int kStartFlag = 0;
constexpr int kDoneFlag = 16;  // its own cache line: the stream polls it over PCIe

const void* sendPointer(const Request& r) { return r.isP2p ? r.sendbuf : r.args.send; }
void* recvPointer(const Request& r) { return r.isP2p ? r.recvbuf : r.args.recv; }
void setSendPointer(Request& r, const void* p) { (r.isP2p ? r.sendbuf : r.args.send) = p; }
void setRecvPointer(Request& r, void* p) { (r.isP2p ? r.recvbuf : r.args.recv) = p; }

}  // namespace

Status DeviceProxy::of(lanesComm* comm, DeviceProxy** out) {
  std::lock_guard<std::mutex> lock(comm->deviceMutex);
  if (!comm->device) {
    const StreamMemops* memops = nullptr;
    LANES_RETURN_IF_ERROR(StreamMemops::get(&memops));
    std::unique_ptr<DeviceProxy> proxy(new DeviceProxy(comm, memops));
    LANES_RETURN_IF_ERROR(proxy->init());
    comm->device = std::move(proxy);
  }
  *out = static_cast<DeviceProxy*>(comm->device.get());
  return Status::ok();
}

DeviceProxy::DeviceProxy(lanesComm* comm, const StreamMemops* memops)
    : comm_(comm), memops_(memops) {}

Status DeviceProxy::init() {
  void* flags = nullptr;
  LANES_CUDA_RETURN(cudaHostAlloc(&flags, 4096, cudaHostAllocPortable | cudaHostAllocMapped));
  flags_ = static_cast<volatile uint32_t*>(flags);
  for (int i = 0; i < 1024; ++i) flags_[i] = 0;
  thread_ = std::thread([this] { run(); });
  LANES_INFO(Init, comm_->rank, "device buffers on GPU %d go through the host-staged proxy",
             comm_->cudaDev);
  return Status::ok();
}

DeviceProxy::~DeviceProxy() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Any stream still parked on a batch must be let go before staging is freed.
  if (flags_ != nullptr) __atomic_store_n(&flags_[kDoneFlag], nextSeq_, __ATOMIC_RELEASE);
  reclaim(true);
  if (lastStarted_ != nullptr) cudaEventDestroy(lastStarted_);
  if (flags_ != nullptr) cudaFreeHost(const_cast<uint32_t*>(flags_));
}

Status DeviceProxy::enqueue(std::vector<Request>& requests, cudaStream_t stream) {
  reclaim(false);
  DeviceScope guard(comm_->cudaDev);

  // Other streams of the group join the first one, and wait for it after.
  const std::vector<cudaStream_t> others = otherStreams(requests, stream);
  LANES_RETURN_IF_ERROR(joinStreams(stream, others));

  Batch batch;
  batch.seq = nextSeq_ + 1;
  LANES_CUDA_RETURN(cudaEventCreateWithFlags(&batch.finished, cudaEventDisableTiming));
  auto fail = [&](Status s) {
    for (auto& b : batch.blocks) pool_.release(b);
    cudaEventDestroy(batch.finished);
    return s;
  };
  for (const Request& r : requests) {
    Request staged = r;
    staged.onDevice = false;
    staged.stream = nullptr;
    setSendPointer(staged, nullptr);
    setRecvPointer(staged, nullptr);
    if (r.sendBytes > 0) {
      PinnedPool::Block block;
      Status s = pool_.acquire(r.sendBytes, &block);
      if (!s) return fail(s);
      batch.blocks.push_back(block);
      s = cudaStatus(
          cudaMemcpyAsync(block.ptr, sendPointer(r), r.sendBytes, cudaMemcpyDeviceToHost, stream),
          "cudaMemcpyAsync (stage input)");
      if (!s) return fail(s);
      setSendPointer(staged, block.ptr);
    }
    if (r.recvBytes > 0) {
      PinnedPool::Block block;
      Status s = pool_.acquire(r.recvBytes, &block);
      if (!s) return fail(s);
      batch.blocks.push_back(block);
      setRecvPointer(staged, block.ptr);
    }
    batch.staged.push_back(staged);
  }
  Status s = Status::ok();
  if (lastStarted_ != nullptr)
    s = cudaStatus(cudaStreamWaitEvent(stream, lastStarted_, 0), "cudaStreamWaitEvent");
  if (s) s = memops_->write(stream, &flags_[kStartFlag], batch.seq);
  if (s) {
    cudaEvent_t started = nullptr;
    s = cudaStatus(cudaEventCreateWithFlags(&started, cudaEventDisableTiming), "cudaEventCreate");
    if (s) s = cudaStatus(cudaEventRecord(started, stream), "cudaEventRecord");
    if (lastStarted_ != nullptr) cudaEventDestroy(lastStarted_);  // released once complete
    lastStarted_ = started;
  }
  if (s) s = memops_->waitGeq(stream, &flags_[kDoneFlag], batch.seq);
  for (size_t i = 0; s && i < requests.size(); ++i) {
    const Request& r = requests[i];
    if (r.recvBytes == 0) continue;
    s = cudaStatus(cudaMemcpyAsync(recvPointer(r), recvPointer(batch.staged[i]), r.recvBytes,
                                   cudaMemcpyHostToDevice, stream),
                   "cudaMemcpyAsync (result)");
  }
  if (s) s = cudaStatus(cudaEventRecord(batch.finished, stream), "cudaEventRecord");
  if (!s) {
    // The start flag may already be in the stream: the batch must still run
    // (or be released) so the stream never waits forever. Queue it as failed.
    comm_->fail(s.code(), "enqueueing on the CUDA stream failed: " + s.message());
  }
  LANES_RETURN_IF_ERROR(forkStreams(stream, others));
  nextSeq_ = batch.seq;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(batch));
  }
  wake_.notify_one();
  return s;
}

void DeviceProxy::waitForStart(const Batch& batch) {
  Backoff backoff;
  for (;;) {
    uint32_t start = __atomic_load_n(&flags_[kStartFlag], __ATOMIC_ACQUIRE);
    if (static_cast<int32_t>(start - batch.seq) >= 0) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_) return;
    }
    if (!comm_->checkAbort()) return;
    backoff.pause();
  }
}

void DeviceProxy::run() {
  for (;;) {
    Batch batch;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      batch = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
    }
    waitForStart(batch);
    bool stopping;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping = stop_;
    }
    Status status = comm_->checkAbort();
    if (status && !stopping) {
      std::lock_guard<std::mutex> engine(comm_->engineMutex);
      status = executeHostRequests(batch.staged);
    }
    if (!status && !stopping) {
      // The stream cannot return an error: record it for lanesCommGetAsyncError.
      comm_->fail(status.code(), status.message());
    }
    __atomic_store_n(&flags_[kDoneFlag], batch.seq, __ATOMIC_RELEASE);
    std::lock_guard<std::mutex> lock(mutex_);
    finished_.push_back(std::move(batch));
    running_ = false;
    drained_.notify_all();
  }
}

Status DeviceProxy::drain(Deadline deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!queue_.empty() || running_) {
    if (drained_.wait_until(lock, deadline.at()) == std::cv_status::timeout && deadline.expired())
      return timeoutError(comm_->describe() +
                          ": a host-memory call waited for earlier device-buffer calls of this "
                          "communicator that never started; their CUDA streams did not reach "
                          "them (synchronise those streams before mixing host and device calls)");
  }
  return Status::ok();
}

void DeviceProxy::reclaim(bool wait) {
  Deadline deadline = Deadline::after(comm_->options.timeoutSeconds);
  Backoff backoff;
  std::lock_guard<std::mutex> lock(mutex_);
  while (!finished_.empty()) {
    Batch& b = finished_.front();
    cudaError_t q = cudaEventQuery(b.finished);
    if (q == cudaErrorNotReady) {
      if (!wait) return;
      if (deadline.expired()) {
        LANES_WARN(Init, comm_->rank,
                   "a stream still uses staging memory after %.0f s; leaking it rather than "
                   "freeing memory the GPU may write",
                   comm_->options.timeoutSeconds);
        return;
      }
      backoff.pause();
      continue;
    }
    for (auto& block : b.blocks) pool_.release(block);
    cudaEventDestroy(b.finished);
    finished_.pop_front();
  }
}

namespace {
// One rank, in place: the result already is the input (PreMulSum, which
// scales it, aside), so nothing goes on the stream; NCCL returns at once too.
bool singleRankNoOp(const Request& r) {
  if (r.isP2p || r.args.nranks != 1 || r.args.send != r.args.recv) return false;
  const bool reduces = r.args.coll == CollType::AllReduce || r.args.coll == CollType::Reduce ||
                       r.args.coll == CollType::ReduceScatter;
  return !(reduces && r.op.kind == RedOpKind::PreMulSum);
}
}  // namespace

namespace {
// One batch of the group: LL, the staged path, or the proxy.
Status enqueueRouted(std::vector<Request>& requests, cudaStream_t stream) {
  // Small all-reduces when every rank is a thread on this GPU: the last to
  // call reduces for all (context_allreduce.h).
  if (ContextAllReduce* shared = ContextAllReduce::route(requests.front().comm, requests))
    return shared->enqueue(requests.front(), stream);
  // Small all-reduces and all-gathers among ranks of one host: one LL kernel
  // through mapped host memory (ll_allreduce.h).
  LlAllReduce* ll = nullptr;
  LANES_RETURN_IF_ERROR(LlAllReduce::route(requests.front().comm, requests, &ll));
  if (ll != nullptr) return ll->enqueue(requests.front(), stream);
  // All-reduces, all-gathers, broadcasts and reduce-scatters among ranks of
  // one host (the last three unless LANES_STAGED_COLLECTIVES=0) take
  // the host-staged copy-engine path (no CPU thread in the way); everything
  // else goes through the proxy.
  StagedCollectives* staged = nullptr;
  LANES_RETURN_IF_ERROR(StagedCollectives::route(requests.front().comm, requests, &staged));
  if (staged != nullptr) return staged->enqueue(requests, stream);
  // Before any other CUDA call of the proxy: under global capture mode even
  // a query could invalidate the caller's capture.
  LANES_RETURN_IF_ERROR(refuseCapture(
      stream,
      "capturing this Lanes call on device buffers into a CUDA Graph is refused: the "
      "host-staged proxy path orders each call by a sequence number written into the stream, "
      "and a graph replay would repeat the captured number instead of taking a new one. Issue "
      "the call outside the capture (small all-reduces and all-gathers, which take the LL "
      "kernel, can be captured)."));
  DeviceProxy* proxy = nullptr;
  LANES_RETURN_IF_ERROR(DeviceProxy::of(requests.front().comm, &proxy));
  return proxy->enqueue(requests, stream);
}
}  // namespace

namespace {
bool holdsP2p(const std::vector<Request>& requests) {
  return std::any_of(requests.begin(), requests.end(), [](const Request& r) { return r.isP2p; });
}

// Whether LL or the staged path would take these collectives (the same answer
// on every rank: the collectives of a group are the same everywhere).
Status gpuDrivenPathTakes(std::vector<Request>& collectives, bool* takes) {
  if (ContextAllReduce::route(collectives.front().comm, collectives) != nullptr) {
    *takes = true;
    return Status::ok();
  }
  LlAllReduce* ll = nullptr;
  LANES_RETURN_IF_ERROR(LlAllReduce::route(collectives.front().comm, collectives, &ll));
  StagedCollectives* staged = nullptr;
  if (ll == nullptr)
    LANES_RETURN_IF_ERROR(StagedCollectives::route(collectives.front().comm, collectives, &staged));
  *takes = ll != nullptr || staged != nullptr;
  return Status::ok();
}
}  // namespace

Status enqueueDeviceRequests(std::vector<Request>& requests, cudaStream_t stream) {
  if (std::erase_if(requests, singleRankNoOp) > 0) {
    if (requests.empty()) return Status::ok();
    // `stream` was the first request's; the paths below take it as the
    // stream the batch runs on (LL launches on it alone).
    stream = requests.front().stream;
  }
  lanesComm* comm = requests.front().comm;
  // Before routePairs takes requests out: the split below joins every stream.
  const std::vector<cudaStream_t> others = otherStreams(requests, stream);

  // Sends and receives between ranks of one host: the pair slots of the
  // host-staged path (staged_sendrecv.cc).
  std::vector<Request> pairs;
  StagedCollectives* pairPath = nullptr;
  LANES_RETURN_IF_ERROR(StagedCollectives::routePairs(comm, requests, &pairs, &pairPath));
  // Sends and receives left (to itself, small ones between processes on one
  // GPU, ranks of other hosts) beside collectives that LL or the staged path
  // take: they go to the proxy on their own, or they would turn those
  // collectives away from the path of the ranks whose groups hold none.
  // (Where the collectives go to the proxy anyway, the group stays one batch:
  // the host engine runs it as one group.)
  std::vector<Request> leftover;
  if (holdsP2p(requests) &&
      !std::all_of(requests.begin(), requests.end(), [](const Request& r) { return r.isP2p; })) {
    std::vector<Request> collectives;
    for (const Request& r : requests) (r.isP2p ? leftover : collectives).push_back(r);
    bool takes = false;
    LANES_RETURN_IF_ERROR(gpuDrivenPathTakes(collectives, &takes));
    if (takes)
      requests = std::move(collectives);
    else
      leftover.clear();
  }
  if (pairPath == nullptr && leftover.empty()) return enqueueRouted(requests, stream);

  // A split group: every part runs on `stream`, which the group's other
  // streams join first and wait for after (NCCL completes a group on all of
  // its streams).
  DeviceScope device(comm->cudaDev);
  LANES_RETURN_IF_ERROR(joinStreams(stream, others));
  for (std::vector<Request>* part : {&pairs, &requests, &leftover})
    for (Request& r : *part) r.stream = stream;
  if (pairPath != nullptr) LANES_RETURN_IF_ERROR(pairPath->enqueue(pairs, stream));
  if (!requests.empty()) LANES_RETURN_IF_ERROR(enqueueRouted(requests, stream));
  if (!leftover.empty()) LANES_RETURN_IF_ERROR(enqueueRouted(leftover, stream));
  return forkStreams(stream, others);
}

}  // namespace lanes

namespace lanes {

Status DeviceProxy::prewarm() {
  const uint64_t bytes = envSize("LANES_PROXY_PREPIN_BYTES", 16ull << 20);
  if (bytes == 0) return Status::ok();
  return pool_.prewarm(static_cast<size_t>(bytes / 4), 4);
}

bool threadFastPathRequested() {
  static const bool requested = envBool("LANES_THREAD_FASTPATH", false);
  return requested;
}

// From facts every rank shares: a rank in a process of its own must not set
// LL up alone while its peers that are threads stay away (setup is collective).
bool llKernelsAllowed(const lanesComm* comm) {
  return threadFastPathRequested() || !someProcessHoldsSeveralRanks(comm);
}

bool streamIsPerThread(cudaStream_t stream) { return stream == cudaStreamPerThread; }

Status prepareDevicePaths(lanesComm* comm) {
  // Setting a path up allocates and registers memory, and those CUDA calls
  // may wait for the whole device. Made lazily, inside a later call, they
  // could wait for a Lanes kernel that waits for a peer thread of this
  // process that the same CUDA lock holds up: a deadlock. At init nothing of
  // Lanes is in flight, so every path is made here, on every rank alike.
  DeviceScope guard(comm->cudaDev);
  // Lazy module loading would load each kernel at its first launch, inside a
  // call, where loading can wait for streams parked on peers (reduce.h).
  LANES_CUDA_RETURN(static_cast<cudaError_t>(cuda::preloadReduceKernels()));
  LANES_CUDA_RETURN(static_cast<cudaError_t>(cuda::preloadLlKernels()));
  LANES_CUDA_RETURN(static_cast<cudaError_t>(cuda::preloadFlagKernels()));
  DeviceProxy* proxy = nullptr;
  LANES_RETURN_IF_ERROR(DeviceProxy::of(comm, &proxy));
  LANES_RETURN_IF_ERROR(proxy->prewarm());
  Request probe;
  probe.comm = comm;
  probe.args.coll = CollType::AllReduce;
  probe.args.count = 1;
  probe.args.type = lanesFloat32;
  probe.args.rank = comm->rank;
  probe.args.nranks = comm->nranks;
  probe.sendBytes = probe.recvBytes = sizeof(float);
  probe.onDevice = true;
  std::vector<Request> batch{probe};
  {
    std::unique_ptr<ContextAllReduce> shared;
    LANES_RETURN_IF_ERROR(ContextAllReduce::create(comm, &shared));
    std::lock_guard<std::mutex> lock(comm->deviceMutex);
    comm->sharedContext = std::move(shared);
  }
  LlAllReduce* ll = nullptr;
  LANES_RETURN_IF_ERROR(LlAllReduce::route(comm, batch, &ll));
  StagedCollectives* staged = nullptr;
  LANES_RETURN_IF_ERROR(StagedCollectives::route(comm, batch, &staged));
  return Status::ok();
}

}  // namespace lanes
