#include "exec/cuda/stream_memops.h"

#include <cuda.h>

#include <mutex>

#include "exec/cuda/cuda_check.h"

namespace lanes {

namespace {
Status devicePointer(volatile uint32_t* hostFlag, CUdeviceptr* out) {
  void* dptr = nullptr;
  LANES_CUDA_RETURN(cudaHostGetDevicePointer(&dptr, const_cast<uint32_t*>(hostFlag), 0));
  *out = reinterpret_cast<CUdeviceptr>(dptr);
  return Status::ok();
}
}  // namespace

Status StreamMemops::get(const StreamMemops** out) {
  static StreamMemops table;
  static Status status;
  static std::once_flag once;
  std::call_once(once, [] {
    void* w = nullptr;
    void* wt = nullptr;
    cudaDriverEntryPointQueryResult q1{}, q2{};
    cudaError_t e1 =
        cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &w, 12000, cudaEnableDefault, &q1);
    cudaError_t e2 =
        cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &wt, 12000, cudaEnableDefault, &q2);
    if (e1 != cudaSuccess || e2 != cudaSuccess || w == nullptr || wt == nullptr) {
      status = cudaError(
          "the CUDA driver does not provide cuStreamWriteValue32/cuStreamWaitValue32 (stream "
          "memory operations); update the NVIDIA driver to one supporting CUDA 12 or later");
      return;
    }
    table.write_ = reinterpret_cast<Fn>(w);
    table.wait_ = reinterpret_cast<Fn>(wt);
  });
  if (!status) return status;
  *out = &table;
  return Status::ok();
}

Status StreamMemops::write(cudaStream_t stream, volatile uint32_t* hostFlag, uint32_t value) const {
  CUdeviceptr addr = 0;
  LANES_RETURN_IF_ERROR(devicePointer(hostFlag, &addr));
  int r = write_(stream, addr, value, CU_STREAM_WRITE_VALUE_DEFAULT);
  if (r != CUDA_SUCCESS)
    return cudaError("cuStreamWriteValue32 failed with CUresult " + std::to_string(r));
  return Status::ok();
}

Status StreamMemops::waitGeq(cudaStream_t stream, volatile uint32_t* hostFlag,
                             uint32_t value) const {
  CUdeviceptr addr = 0;
  LANES_RETURN_IF_ERROR(devicePointer(hostFlag, &addr));
  int r = wait_(stream, addr, value, CU_STREAM_WAIT_VALUE_GEQ);
  if (r != CUDA_SUCCESS)
    return cudaError("cuStreamWaitValue32 failed with CUresult " + std::to_string(r));
  return Status::ok();
}

}  // namespace lanes
