// lanesMemAlloc (ncclMemAlloc in the NCCL layer): device memory of the current
// GPU that the device paths take, for ranks as processes and as threads.
#include <vector>

#include "tests/gpu/gpu_harness.h"

namespace lanes::test {
namespace {

// All-reduce and all-gather on buffers from lanesMemAlloc, checked on the host.
void allocatedBuffersWork(GpuRank& self) {
  constexpr size_t kCount = (size_t{4} << 20) + 3;  // odd, past the small-message paths
  void* send = nullptr;
  void* recv = nullptr;
  GPU_CHECK_LANES(lanesMemAlloc(&send, kCount * sizeof(float)), self.comm);
  GPU_CHECK_LANES(lanesMemAlloc(&recv, kCount * self.nranks * sizeof(float)), self.comm);
  cudaPointerAttributes attr{};
  GPU_CHECK_CUDA(cudaPointerGetAttributes(&attr, send));
  GPU_CHECK(attr.type == cudaMemoryTypeDevice, "lanesMemAlloc gave memory of type %d",
            static_cast<int>(attr.type));
  std::vector<float> host(kCount, static_cast<float>(self.rank + 1));
  GPU_CHECK_CUDA(copyIn(send, host.data(), kCount * sizeof(float), self.stream));
  GPU_CHECK_LANES(
      lanesAllReduce(send, recv, kCount, lanesFloat32, lanesSum, self.comm, self.stream),
      self.comm);
  GPU_CHECK_CUDA(copyOut(host.data(), recv, kCount * sizeof(float), self.stream));
  const float sum = self.nranks * (self.nranks + 1) / 2.0f;
  for (size_t i = 0; i < kCount; i += 4093)
    GPU_CHECK(host[i] == sum, "element %zu is %g, expected %g", i, host[i], sum);
  GPU_CHECK_LANES(lanesAllGather(send, recv, kCount, lanesFloat32, self.comm, self.stream),
                  self.comm);
  std::vector<float> all(kCount * self.nranks);
  GPU_CHECK_CUDA(copyOut(all.data(), recv, all.size() * sizeof(float), self.stream));
  for (int r = 0; r < self.nranks; ++r)
    GPU_CHECK(all[r * kCount + kCount - 1] == r + 1, "rank %d's block holds %g", r,
              all[r * kCount + kCount - 1]);
  GPU_CHECK_LANES(lanesMemFree(send), self.comm);
  GPU_CHECK_LANES(lanesMemFree(recv), self.comm);
}

TEST(MemAllocGpu, BuffersServeProcesses) {
  GPU_SKIP_UNLESS_GPU_FOR_FORK();
  runGpuProcesses(2, allocatedBuffersWork);
}

TEST(MemAllocGpu, BuffersServeThreads) {
  GPU_SKIP_UNLESS_GPU_HERE();
  runGpuThreads(3, allocatedBuffersWork);
}

}  // namespace
}  // namespace lanes::test
