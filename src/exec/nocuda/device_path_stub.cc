// Built when Lanes is compiled without CUDA: every buffer is host memory.
#include <cstring>

#include "exec/device_path.h"
#include "exec/request.h"

namespace lanes {

bool cudaUsable() { return false; }
int currentCudaDevice() { return -1; }
int cudaDeviceCount() { return 0; }
bool cudaDeviceRunsMps(int) { return false; }
Status setCudaDevice(int) { return Status::ok(); }

Status copyToHost(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
  return Status::ok();
}

Status classifyBuffer(const void*, BufferInfo* out) {
  *out = BufferInfo{};
  return Status::ok();
}

Status setupProxyPath(lanesComm*) { return Status::ok(); }
Status setupSharedContextPath(lanesComm*) { return Status::ok(); }
Status setupLlPath(lanesComm*) { return Status::ok(); }
Status setupStagedPath(lanesComm*) { return Status::ok(); }
void settleDevicePaths(lanesComm*) {}
bool streamIsPerThread(cudaStream_t) { return false; }
DeviceMarker markDeviceWork(lanesComm*, cudaStream_t) { return {}; }
bool deviceWorkPassed(lanesComm*, int32_t) { return false; }

Status enqueueDeviceRequests(std::vector<Request>&, cudaStream_t, const PathChooser&,
                             const std::function<void()>&) {
  return invalidUsage("this Lanes build has no CUDA support; device buffers cannot be used");
}

Status deviceAlloc(void**, size_t) {
  return cudaError(
      "lanesMemAlloc: this Lanes build has no CUDA support (built without the CUDA "
      "toolkit or with LANES_ENABLE_CUDA=OFF)");
}

// Nothing this build allocates is device memory, as a CUDA build without a GPU sees it.
Status deviceFree(void*) {
  return invalidArgument("lanesMemFree: the pointer is not device memory from lanesMemAlloc");
}

}  // namespace lanes
