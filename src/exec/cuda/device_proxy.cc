#include "exec/cuda/device_proxy.h"

#include <pthread.h>

#include <algorithm>

#include "base/cuda_check.h"
#include "base/deadline.h"
#include "base/log.h"
#include "exec/comm_config.h"
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

Status DeviceProxy::of(CommView comm, DeviceProxy** out) {
  std::lock_guard<std::mutex> lock(comm.paths().mutex);
  if (!comm.paths().proxy) {
    const StreamMemops* memops = nullptr;
    LANES_RETURN_IF_ERROR(StreamMemops::get(&memops));
    std::unique_ptr<DeviceProxy> proxy(new DeviceProxy(comm, memops));
    LANES_RETURN_IF_ERROR(proxy->init());
    comm.paths().proxy = std::move(proxy);
  }
  *out = static_cast<DeviceProxy*>(comm.paths().proxy.get());
  return Status::ok();
}

DeviceProxy::DeviceProxy(CommView comm, const StreamMemops* memops)
    : comm_(comm), memops_(memops) {}

Status DeviceProxy::init() {
  void* flags = nullptr;
  LANES_CUDA_RETURN(cudaHostAlloc(&flags, 4096, cudaHostAllocPortable | cudaHostAllocMapped));
  flags_ = static_cast<volatile uint32_t*>(flags);
  for (int i = 0; i < 1024; ++i) flags_[i] = 0;
  // The thread reduces and copies bytes staged for this GPU: on its NUMA
  // node's CPUs, near the staging and the GPU's link (where the process may).
  cpu_set_t near;
  const bool pin = comm_.gpuLocalCpus(&near);
  thread_ = std::thread([this, pin, near] {
    if (pin) pthread_setaffinity_np(pthread_self(), sizeof(near), &near);
    run();
  });
  LANES_INFO(Init, comm_.rank(), "device buffers on GPU %d go through the host-staged proxy%s",
             comm_.cudaDev(), pin ? ", its thread on the GPU's NUMA node" : "");
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
  DeviceScope guard(comm_.cudaDev());

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
    staged.viaProxy = true;
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
    comm_.fail(s.code(), "enqueueing on the CUDA stream failed: " + s.message());
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
    if (!comm_.checkAbort()) return;
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
    Status status = comm_.checkAbort();
    if (status && !stopping) status = comm_.runOnHost(batch.staged);
    if (!status && !stopping) {
      // The stream cannot return an error: record it for lanesCommGetAsyncError.
      comm_.fail(status.code(), status.message());
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
      return timeoutError(comm_.describe() +
                          ": a host-memory call waited for earlier device-buffer calls of this "
                          "communicator that never started; their CUDA streams did not reach "
                          "them (synchronise those streams before mixing host and device calls)");
  }
  return Status::ok();
}

void DeviceProxy::reclaim(bool wait) {
  Deadline deadline = comm_.deadline();
  Backoff backoff;
  std::lock_guard<std::mutex> lock(mutex_);
  while (!finished_.empty()) {
    Batch& b = finished_.front();
    cudaError_t q = cudaEventQuery(b.finished);
    if (q == cudaErrorNotReady) {
      if (!wait) return;
      if (deadline.expired()) {
        LANES_WARN(Init, comm_.rank(),
                   "a stream still uses staging memory after %.0f s; leaking it rather than "
                   "freeing memory the GPU may write",
                   comm_.timeoutSeconds());
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

}  // namespace lanes

namespace lanes {

Status DeviceProxy::prewarm() {
  const size_t bytes = comm_.config().proxyPrepinBytes;
  if (bytes == 0) return Status::ok();
  return pool_.prewarm(bytes / 4, 4);
}

}  // namespace lanes
