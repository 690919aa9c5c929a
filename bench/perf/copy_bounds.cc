#include "perf/copy_bounds.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#if LANES_PERF_CUDA
#include <cuda_runtime.h>

#include "perf/cuda_owners.h"
#endif

namespace lanes::perf {

#if LANES_PERF_CUDA

namespace {

Status check(cudaError_t err, const char* call) {
  if (err == cudaSuccess) return Status::ok();
  return cudaError(std::string("copy bounds: ") + call + " failed: " + cudaGetErrorName(err) +
                   " (" + cudaGetErrorString(err) + ")");
}
#define BOUND_CUDA(call) LANES_RETURN_IF_ERROR(check((call), #call))

constexpr int kReps = 8;

Status makeEvents(std::vector<Event>* events, int n) {
  for (int i = 0; i < n; ++i) {
    cudaEvent_t e = nullptr;
    BOUND_CUDA(cudaEventCreate(&e));
    events->emplace_back(e);
  }
  return Status::ok();
}

Status elapsedMs(const Event& from, const Event& to, double* ms) {
  float f = 0;
  BOUND_CUDA(cudaEventElapsedTime(&f, from.get(), to.get()));
  *ms = f;
  return Status::ok();
}

// One direction (or a device copy) alone: kReps copies back to back, one warm-up.
Status timeAlone(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s,
                 double* gbps) {
  std::vector<Event> ev;
  LANES_RETURN_IF_ERROR(makeEvents(&ev, 2));
  BOUND_CUDA(cudaMemcpyAsync(dst, src, bytes, kind, s));
  BOUND_CUDA(cudaEventRecord(ev[0].get(), s));
  for (int i = 0; i < kReps; ++i) BOUND_CUDA(cudaMemcpyAsync(dst, src, bytes, kind, s));
  BOUND_CUDA(cudaEventRecord(ev[1].get(), s));
  BOUND_CUDA(cudaEventSynchronize(ev[1].get()));
  double ms = 0;
  LANES_RETURN_IF_ERROR(elapsedMs(ev[0], ev[1], &ms));
  *gbps = static_cast<double>(bytes) * kReps / (ms * 1e-3) / 1e9;
  return Status::ok();
}

// Both directions at once. An event after every copy: each direction's rate
// is taken over the copies it finished while the other direction was still
// running, so the faster one's early end does not flatter the slower.
Status timeBoth(void* dev0, const void* host0, void* host1, const void* dev1, size_t bytes,
                cudaStream_t up, cudaStream_t down, double* h2d, double* d2h) {
  std::vector<Event> start, upEv, downEv;
  LANES_RETURN_IF_ERROR(makeEvents(&start, 1));
  LANES_RETURN_IF_ERROR(makeEvents(&upEv, kReps));
  LANES_RETURN_IF_ERROR(makeEvents(&downEv, kReps));
  BOUND_CUDA(cudaEventRecord(start[0].get(), up));
  BOUND_CUDA(cudaStreamWaitEvent(down, start[0].get(), 0));
  for (int i = 0; i < kReps; ++i) {
    BOUND_CUDA(cudaMemcpyAsync(dev0, host0, bytes, cudaMemcpyHostToDevice, up));
    BOUND_CUDA(cudaEventRecord(upEv[i].get(), up));
    BOUND_CUDA(cudaMemcpyAsync(host1, dev1, bytes, cudaMemcpyDeviceToHost, down));
    BOUND_CUDA(cudaEventRecord(downEv[i].get(), down));
  }
  BOUND_CUDA(cudaStreamSynchronize(up));
  BOUND_CUDA(cudaStreamSynchronize(down));
  std::vector<double> tu(kReps), td(kReps);
  for (int i = 0; i < kReps; ++i) {
    LANES_RETURN_IF_ERROR(elapsedMs(start[0], upEv[i], &tu[i]));
    LANES_RETURN_IF_ERROR(elapsedMs(start[0], downEv[i], &td[i]));
  }
  const double window = std::min(tu[kReps - 1], td[kReps - 1]);
  auto rate = [&](const std::vector<double>& t) {
    int done = 0;  // copies finished inside the window (at least the first)
    while (done < kReps && t[done] <= window) ++done;
    done = std::max(done, 1);
    return static_cast<double>(bytes) * done / (t[done - 1] * 1e-3) / 1e9;
  };
  *h2d = rate(tu);
  *d2h = rate(td);
  return Status::ok();
}

}  // namespace

Status measureCopyBounds(size_t bytes, CopyBounds* out) {
  void* p = nullptr;
  std::unique_ptr<void, DeviceFree> dev0, dev1;
  std::unique_ptr<void, PinnedFree> host0, host1;
  BOUND_CUDA(cudaMalloc(&p, bytes));
  dev0.reset(p);
  BOUND_CUDA(cudaMalloc(&p, bytes));
  dev1.reset(p);
  BOUND_CUDA(cudaMallocHost(&p, bytes));
  host0.reset(p);
  std::memset(p, 1, bytes);  // resident before timing
  BOUND_CUDA(cudaMallocHost(&p, bytes));
  host1.reset(p);
  std::memset(p, 2, bytes);
  cudaStream_t s = nullptr;
  BOUND_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Stream up(s);
  BOUND_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Stream down(s);
  BOUND_CUDA(cudaMemsetAsync(dev0.get(), 0, bytes, up.get()));
  BOUND_CUDA(cudaMemsetAsync(dev1.get(), 0, bytes, up.get()));
  BOUND_CUDA(cudaStreamSynchronize(up.get()));

  CopyBounds b;
  LANES_RETURN_IF_ERROR(
      timeAlone(dev0.get(), host0.get(), bytes, cudaMemcpyHostToDevice, up.get(), &b.h2d));
  LANES_RETURN_IF_ERROR(
      timeAlone(host1.get(), dev1.get(), bytes, cudaMemcpyDeviceToHost, up.get(), &b.d2h));
  // Both directions at once, five times, keeping the best: single reads on the
  // H200 ranged from 40 to 51 GB/s for the same link, which moved a
  // time/bound ratio by up to 20 % (the first run also warms the second stream).
  for (int round = 0; round < 5; ++round) {
    double h = 0, d = 0;
    LANES_RETURN_IF_ERROR(timeBoth(dev0.get(), host0.get(), host1.get(), dev1.get(), bytes,
                                   up.get(), down.get(), &h, &d));
    if (h + d > b.bothH2d + b.bothD2h) {
      b.bothH2d = h;
      b.bothD2h = d;
    }
  }
  LANES_RETURN_IF_ERROR(
      timeAlone(dev1.get(), dev0.get(), bytes, cudaMemcpyDeviceToDevice, up.get(), &b.d2dCopy));
  *out = b;
  return Status::ok();
}

#else  // no CUDA data path in this build

Status measureCopyBounds(size_t, CopyBounds*) {
  return invalidUsage("copy bounds need the CUDA data path, which this build does not have.");
}

#endif

}  // namespace lanes::perf
