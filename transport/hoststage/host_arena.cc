#include "transport/hoststage/host_arena.h"

#include <cuda_runtime.h>

#include <utility>

#include "transport/common/agree.h"

namespace lanes {

Status HostArena::create(Bootstrap& bootstrap, const HostArenaSpec& spec, Deadline deadline,
                         std::unique_ptr<HostArena>* out, bool* fatal) {
  std::unique_ptr<HostArena> arena(new HostArena());
  LANES_RETURN_IF_ERROR(SharedBlock::create(bootstrap, spec, deadline, &arena->block_, fatal));

  // Each mapping is registered by its own rank.
  Status local;
  cudaError_t err = cudaHostRegister(arena->block_->data(), spec.bytes,
                                     cudaHostRegisterPortable | cudaHostRegisterMapped);
  if (err == cudaSuccess) {
    arena->registered_ = true;
    err = cudaHostGetDevicePointer(&arena->device_, arena->block_->data(), 0);
  }
  if (err != cudaSuccess) {
    local =
        cudaError("rank " + std::to_string(bootstrap.rank()) + ": registering the " +
                  sharedSizeText(spec.bytes) + " " + spec.what + " " + spec.name +
                  " with CUDA failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) +
                  "); check the locked-memory limit (ulimit -l)" + spec.registerHint);
    cudaGetLastError();  // not sticky: later calls must not see it
  }
  LANES_RETURN_IF_ERROR(agreeOnStatus(
      bootstrap, local, ("register the " + spec.what + " with CUDA").c_str(), deadline, fatal));
  *out = std::move(arena);
  return Status::ok();
}

HostArena::~HostArena() {
  // Leaked: a stream may still read or write these pages, so they stay mapped
  // and pinned for the life of the process rather than let the GPU fault.
  if (registered_ && !leaked_) cudaHostUnregister(block_->data());
}

}  // namespace lanes
