// CUDA error -> Status with the call and what to do.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "base/status.h"

namespace lanes {

inline Status cudaStatus(cudaError_t err, const char* call) {
  if (err == cudaSuccess) return Status::ok();
  return cudaError(std::string(call) + " failed: " + cudaGetErrorName(err) + " (" +
                   cudaGetErrorString(err) + ")");
}

// The kernels' launch helpers (kernels/cuda/*.h) return a cudaError_t as int,
// so their headers stay free of the runtime's types.
inline Status kernelStatus(int rc, const char* what) {
  return cudaStatus(static_cast<cudaError_t>(rc), what);
}

// `refusal` (lanesInvalidUsage) when `stream` is being captured into a CUDA
// Graph: for paths whose per-call counters a replay would repeat.
inline Status refuseCapture(cudaStream_t stream, const char* refusal) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (Status s = cudaStatus(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing"); !s)
    return s;
  return capture == cudaStreamCaptureStatusNone ? Status::ok() : invalidUsage(refusal);
}

}  // namespace lanes

#define LANES_CUDA_RETURN(call) LANES_RETURN_IF_ERROR(::lanes::cudaStatus((call), #call))
