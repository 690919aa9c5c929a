#include "tests/gpu/gpu_kernels.h"

namespace lanes::test {
namespace {

__device__ unsigned long long globalNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ float orderingInputDev(int rank, size_t index, int salt) {
  return static_cast<float>(
      static_cast<int>(
          (index * 7 + static_cast<size_t>(rank) * 13 + static_cast<size_t>(salt) * 5) % 63) -
      31);
}

__global__ void gateKernel(const volatile int* open, int* timedOut, unsigned long long limitNs) {
  const unsigned long long start = globalNs();
  while (*open == 0) {
    if (globalNs() - start > limitNs) {
      *timedOut = 1;
      return;
    }
    __nanosleep(1000);
  }
}

__global__ void fillKernel(float* out, size_t count, int rank, int salt, float scale) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    out[i] = orderingInputDev(rank, i, salt) * scale;
}

__global__ void checkSumKernel(const float* got, size_t count, int nranks, int salt, float scale,
                               unsigned long long* wrong, unsigned long long* firstWrong) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float expected = 0;
    for (int r = 0; r < nranks; ++r) expected += orderingInputDev(r, i, salt);
    if (got[i] != expected * scale) {
      atomicAdd(wrong, 1ull);
      atomicMin(firstWrong, static_cast<unsigned long long>(i));
    }
  }
}

unsigned gridFor(size_t count) {
  size_t blocks = (count + 255) / 256;
  if (blocks < 1) blocks = 1;
  if (blocks > 1024) blocks = 1024;
  return static_cast<unsigned>(blocks);
}

}  // namespace

cudaError_t launchGate(cudaStream_t stream, const int* open, int* timedOut,
                       unsigned long long limitNs) {
  gateKernel<<<1, 1, 0, stream>>>(open, timedOut, limitNs);
  return cudaGetLastError();
}

cudaError_t launchFillOrdering(cudaStream_t stream, float* out, size_t count, int rank, int salt,
                               float scale) {
  if (count == 0) return cudaSuccess;
  fillKernel<<<gridFor(count), 256, 0, stream>>>(out, count, rank, salt, scale);
  return cudaGetLastError();
}

cudaError_t launchCheckOrderingSum(cudaStream_t stream, const float* got, size_t count, int nranks,
                                   int salt, float scale, unsigned long long* wrong,
                                   unsigned long long* firstWrong) {
  if (count == 0) return cudaSuccess;
  checkSumKernel<<<gridFor(count), 256, 0, stream>>>(got, count, nranks, salt, scale, wrong,
                                                     firstWrong);
  return cudaGetLastError();
}

cudaError_t preloadTestKernels() {
  cudaFuncAttributes attr{};
  cudaError_t e = cudaFuncGetAttributes(&attr, gateKernel);
  if (e == cudaSuccess) e = cudaFuncGetAttributes(&attr, fillKernel);
  if (e == cudaSuccess) e = cudaFuncGetAttributes(&attr, checkSumKernel);
  return e;
}

}  // namespace lanes::test
