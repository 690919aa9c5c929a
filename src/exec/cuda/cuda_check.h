// CUDA error -> Status with the call and what to do.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "core/status.h"

namespace lanes {

inline Status cudaStatus(cudaError_t err, const char* call) {
  if (err == cudaSuccess) return Status::ok();
  return cudaError(std::string(call) + " failed: " + cudaGetErrorName(err) + " (" +
                   cudaGetErrorString(err) + ")");
}

}  // namespace lanes

#define LANES_CUDA_RETURN(call) LANES_RETURN_IF_ERROR(::lanes::cudaStatus((call), #call))
