// Makes a communicator's GPU current for a scope and restores the caller's
// on exit: every entry into the device paths runs on the caller's thread,
// whose current device is the caller's business.
#pragma once

#include <cuda_runtime.h>

namespace lanes {

class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (device >= 0 && cudaGetDevice(&previous_) == cudaSuccess && previous_ != device &&
        cudaSetDevice(device) == cudaSuccess)
      changed_ = true;
  }
  ~DeviceScope() {
    if (changed_) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;
  bool changed_ = false;
};

}  // namespace lanes
