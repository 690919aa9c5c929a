// Which memory a pointer is, and which GPU this thread uses.
#include <cuda_runtime.h>

#include <cstring>

#include "base/cuda_check.h"
#include "exec/device_path.h"

namespace lanes {

int cudaDeviceCount() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky "no driver"/"no device" error
      return 0;
    }
    return n;
  }();
  return count;
}

bool cudaUsable() { return cudaDeviceCount() > 0; }

bool cudaDeviceRunsMps(int device) {
  if (!cudaUsable() || device < 0) return false;
  int mps = 0;
  if (cudaDeviceGetAttribute(&mps, cudaDevAttrMpsEnabled, device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return mps != 0;
}

int currentCudaDevice() {
  if (!cudaUsable()) return -1;
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) return -1;
  return dev;
}

Status setCudaDevice(int device) {
  if (!cudaUsable() || device < 0) return Status::ok();
  LANES_CUDA_RETURN(cudaSetDevice(device));
  return Status::ok();
}

Status copyToHost(void* dst, const void* src, size_t bytes) {
  BufferInfo info;
  LANES_RETURN_IF_ERROR(classifyBuffer(src, &info));
  if (info.space == MemSpace::Host) {  // no CUDA call: host-only machines too
    std::memcpy(dst, src, bytes);
    return Status::ok();
  }
  LANES_CUDA_RETURN(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  return Status::ok();
}

Status classifyBuffer(const void* ptr, BufferInfo* out) {
  *out = BufferInfo{};
  if (ptr == nullptr || !cudaUsable()) return Status::ok();
  cudaPointerAttributes attr{};
  cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return Status::ok();  // memory CUDA never saw: plain host memory
  }
  if (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) {
    out->space = MemSpace::Device;
    out->device = attr.device;
  }
  return Status::ok();
}

Status deviceAlloc(void** ptr, size_t bytes) {
  if (!cudaUsable())
    return cudaError(
        "lanesMemAlloc: no CUDA device is visible to this process (check "
        "CUDA_VISIBLE_DEVICES and the driver); host buffers need no allocation "
        "through Lanes");
  // Plain cudaMalloc memory: every device path takes it, and CUDA IPC can export it.
  LANES_CUDA_RETURN(cudaMalloc(ptr, bytes));
  return Status::ok();
}

Status deviceFree(void* ptr) {
  BufferInfo info;
  LANES_RETURN_IF_ERROR(classifyBuffer(ptr, &info));
  if (info.space != MemSpace::Device)
    return invalidArgument("lanesMemFree: the pointer is not device memory from lanesMemAlloc");
  LANES_CUDA_RETURN(cudaFree(ptr));
  return Status::ok();
}

}  // namespace lanes
