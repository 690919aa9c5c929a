#include "exec/cuda/stream_memops.h"

#include <cuda.h>

#include <mutex>
#include <string>

#include "base/cuda_check.h"
#include "base/env.h"
#include "base/log.h"
#include "kernels/cuda/stream_flags.h"

namespace lanes {

Status StreamMemops::get(const StreamMemops** out) {
  static StreamMemops table;
  static Status status;
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string mode = envString("LANES_STREAM_MEMOPS").value_or("auto");
    if (mode != "auto" && mode != "driver" && mode != "kernel") {
      status =
          invalidArgument("LANES_STREAM_MEMOPS=" + mode + " is not one of auto, driver, kernel");
      return;
    }
    void* w = nullptr;
    void* wt = nullptr;
    cudaDriverEntryPointQueryResult q1{}, q2{};
    const bool found = mode != "kernel" &&
                       cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &w, 12000,
                                                        cudaEnableDefault, &q1) == cudaSuccess &&
                       cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &wt, 12000,
                                                        cudaEnableDefault, &q2) == cudaSuccess &&
                       w != nullptr && wt != nullptr;
    if (!found && mode == "driver") {
      status = cudaError(
          "LANES_STREAM_MEMOPS=driver, but the CUDA driver does not provide "
          "cuStreamWriteValue32/cuStreamWaitValue32 (stream memory operations); update the "
          "NVIDIA driver to one supporting CUDA 12 or later, or unset the variable");
      return;
    }
    cudaGetLastError();  // a failed entry-point query must not linger
    table.write_ = reinterpret_cast<Fn>(w);
    table.wait_ = reinterpret_cast<Fn>(wt);
    table.driver_.store(found, std::memory_order_relaxed);
    if (!found)
      LANES_INFO(Init, -1, "stream counters: one-thread kernels (%s)",
                 mode == "kernel" ? "LANES_STREAM_MEMOPS=kernel"
                                  : "the driver has no stream memory operations");
  });
  if (!status) return status;
  *out = &table;
  return Status::ok();
}

bool StreamMemops::refused(int result) const {
  if (result != CUDA_ERROR_NOT_SUPPORTED) return false;
  if (driver_.exchange(false))
    LANES_WARN(Init, -1,
               "the CUDA driver refused a stream memory operation (CUDA_ERROR_NOT_SUPPORTED); "
               "stream counters use one-thread kernels from now on");
  return true;
}

Status StreamMemops::deviceAddress(volatile uint32_t* hostFlag, unsigned long long* out) const {
  int device = 0;
  LANES_CUDA_RETURN(cudaGetDevice(&device));
  if (device >= 0 && device < kCachedDevices) {
    std::atomic<int8_t>& same = sameAddress_[static_cast<size_t>(device)];
    int8_t known = same.load(std::memory_order_relaxed);
    if (known == 0) {
      int attr = 0;
      LANES_CUDA_RETURN(
          cudaDeviceGetAttribute(&attr, cudaDevAttrCanUseHostPointerForRegisteredMem, device));
      known = attr != 0 ? 1 : -1;
      same.store(known, std::memory_order_relaxed);
    }
    if (known > 0) {
      *out = reinterpret_cast<uintptr_t>(hostFlag);
      return Status::ok();
    }
  }
  void* dptr = nullptr;
  LANES_CUDA_RETURN(cudaHostGetDevicePointer(&dptr, const_cast<uint32_t*>(hostFlag), 0));
  *out = reinterpret_cast<uintptr_t>(dptr);
  return Status::ok();
}

Status StreamMemops::write(cudaStream_t stream, volatile uint32_t* hostFlag, uint32_t value) const {
  CUdeviceptr addr = 0;
  LANES_RETURN_IF_ERROR(deviceAddress(hostFlag, &addr));
  if (usesDriver()) {
    int r = write_(stream, addr, value, CU_STREAM_WRITE_VALUE_DEFAULT);
    if (r == CUDA_SUCCESS) return Status::ok();
    if (!refused(r))
      return cudaError("cuStreamWriteValue32 failed with CUresult " + std::to_string(r));
  }
  return kernelStatus(
      cuda::launchWriteFlag(reinterpret_cast<volatile uint32_t*>(addr), value, stream),
      "launching the counter-write kernel");
}

Status StreamMemops::waitGeq(cudaStream_t stream, volatile uint32_t* hostFlag,
                             uint32_t value) const {
  CUdeviceptr addr = 0;
  LANES_RETURN_IF_ERROR(deviceAddress(hostFlag, &addr));
  if (usesDriver()) {
    int r = wait_(stream, addr, value, CU_STREAM_WAIT_VALUE_GEQ);
    if (r == CUDA_SUCCESS) return Status::ok();
    if (!refused(r))
      return cudaError("cuStreamWaitValue32 failed with CUresult " + std::to_string(r));
  }
  return kernelStatus(
      cuda::launchWaitFlagGeq(reinterpret_cast<const volatile uint32_t*>(addr), value, stream),
      "launching the counter-wait kernel");
}

}  // namespace lanes
