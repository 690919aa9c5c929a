#include <cuda_runtime.h>

#include "kernels/cuda/stream_flags.h"

namespace lanes::cuda {
namespace {

__global__ void waitFlagGeqKernel(const volatile uint32_t* flag, uint32_t value) {
  while (static_cast<int32_t>(*flag - value) < 0) __nanosleep(256);
  __threadfence_system();
}

__global__ void writeFlagKernel(volatile uint32_t* flag, uint32_t value) {
  __threadfence_system();
  *flag = value;
  __threadfence_system();
}

}  // namespace

int launchWaitFlagGeq(const volatile uint32_t* flag, uint32_t value, cudaStream_t stream) {
  if (flag == nullptr) return static_cast<int>(cudaErrorInvalidValue);
  waitFlagGeqKernel<<<1, 1, 0, stream>>>(flag, value);
  return static_cast<int>(cudaGetLastError());
}

int launchWriteFlag(volatile uint32_t* flag, uint32_t value, cudaStream_t stream) {
  if (flag == nullptr) return static_cast<int>(cudaErrorInvalidValue);
  writeFlagKernel<<<1, 1, 0, stream>>>(flag, value);
  return static_cast<int>(cudaGetLastError());
}

int preloadFlagKernels() {
  cudaFuncAttributes attr{};
  cudaError_t e = cudaFuncGetAttributes(&attr, waitFlagGeqKernel);
  if (e == cudaSuccess) e = cudaFuncGetAttributes(&attr, writeFlagKernel);
  return static_cast<int>(e);
}

}  // namespace lanes::cuda
