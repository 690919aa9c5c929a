#include "perf/host_sum_bound.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#if LANES_PERF_CUDA
#include <cuda_runtime.h>

#include "base/cuda_check.h"
#include "perf/cuda_owners.h"
#endif

#include "kernels/cpu/reduce.h"

namespace lanes::perf {

#if LANES_PERF_CUDA

namespace {

using Clock = std::chrono::steady_clock;

// Sums `srcs` into `dst` over [begin, end) floats, block by block as the
// reducers do (kernels/cpu/reduce.h), so each input streams past the partial sum once.
void sumRange(float* dst, const std::vector<float*>& srcs, size_t begin, size_t end) {
  constexpr size_t kBlock = 8192;  // 32 KiB of floats
  for (size_t at = begin; at < end; at += kBlock) {
    const size_t len = std::min(kBlock, end - at);
    cpu::reduce(dst + at, srcs[0] + at, srcs[1] + at, len, lanesFloat32, RedOpKind::Sum);
    for (size_t k = 2; k < srcs.size(); ++k)
      cpu::reduce(dst + at, dst + at, srcs[k] + at, len, lanesFloat32, RedOpKind::Sum);
  }
}

}  // namespace

Status measureHostSumBound(int nranks, size_t bytes, int threads, HostSumBound* out) {
  const auto n = static_cast<size_t>(std::max(2, nranks));
  const size_t count = bytes / sizeof(float);
  std::vector<std::unique_ptr<void, DeviceFree>> device;
  std::vector<std::unique_ptr<void, PinnedFree>> down, up;
  std::vector<Stream> streams;
  for (size_t i = 0; i < n; ++i) {
    void* p = nullptr;
    LANES_CUDA_RETURN(cudaMalloc(&p, bytes));
    device.emplace_back(p);
    LANES_CUDA_RETURN(cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
    down.emplace_back(p);
    LANES_CUDA_RETURN(cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
    std::memset(p, 0, bytes);
    up.emplace_back(p);
    for (int k = 0; k < 2; ++k) {
      cudaStream_t s = nullptr;
      LANES_CUDA_RETURN(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      streams.emplace_back(s);
    }
  }
  // The sum reads the uploads' sources (the downloads' targets change under
  // it) into a buffer of its own, as the reducers read the input slots.
  std::vector<float> sum(count);
  std::vector<float*> srcs;
  for (auto& u : up) srcs.push_back(static_cast<float*>(u.get()));

  auto once = [&](HostSumBound* b) -> Status {
    const Clock::time_point t0 = Clock::now();
    for (size_t i = 0; i < n; ++i) {
      LANES_CUDA_RETURN(cudaMemcpyAsync(down[i].get(), device[i].get(), bytes,
                                        cudaMemcpyDeviceToHost, streams[2 * i].get()));
      LANES_CUDA_RETURN(cudaMemcpyAsync(device[i].get(), up[i].get(), bytes, cudaMemcpyHostToDevice,
                                        streams[2 * i + 1].get()));
    }
    // The copies' end, seen by a thread of its own while the sum runs.
    Clock::time_point copied;
    cudaError_t copyErr = cudaSuccess;
    std::thread waiter([&] {
      for (auto& s : streams)
        if (cudaError_t e = cudaStreamSynchronize(s.get()); e != cudaSuccess) copyErr = e;
      copied = Clock::now();
    });
    std::vector<std::thread> summers;
    const auto parts = static_cast<size_t>(std::max(1, threads));
    const size_t per = (count + parts - 1) / parts;
    for (size_t t = 0; t < parts; ++t)
      summers.emplace_back([&, t] {
        sumRange(sum.data(), srcs, std::min(count, t * per), std::min(count, (t + 1) * per));
      });
    for (std::thread& t : summers) t.join();
    const Clock::time_point summed = Clock::now();
    waiter.join();
    LANES_CUDA_RETURN(copyErr);
    b->sumSeconds = std::chrono::duration<double>(summed - t0).count();
    b->linkSeconds = std::chrono::duration<double>(copied - t0).count();
    b->seconds = std::max(b->sumSeconds, b->linkSeconds);
    return Status::ok();
  };
  HostSumBound warm, best;
  LANES_RETURN_IF_ERROR(once(&warm));  // pages touched, threads and copies warm
  best.seconds = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    HostSumBound b;
    LANES_RETURN_IF_ERROR(once(&b));
    if (b.seconds < best.seconds) best = b;
  }
  *out = best;
  return Status::ok();
}

#else

Status measureHostSumBound(int, size_t, int, HostSumBound*) {
  return invalidUsage("the host summation bound needs a build with CUDA");
}

#endif

}  // namespace lanes::perf
