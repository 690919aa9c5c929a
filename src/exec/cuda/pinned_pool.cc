#include "exec/cuda/pinned_pool.h"

#include <cuda_runtime.h>

#include <vector>

#include "base/cuda_check.h"

namespace lanes {

PinnedPool::~PinnedPool() {
  for (auto& [cap, ptr] : free_) cudaFreeHost(ptr);
}

Status PinnedPool::acquire(size_t bytes, Block* out) {
  // Round to a power of two from 64 KiB so blocks get reused across sizes.
  size_t cap = 64 * 1024;
  while (cap < bytes) cap <<= 1;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // The smallest cached block that fits, however much larger: a new
    // allocation may wait for the whole device (see prewarm).
    auto it = free_.lower_bound(cap);
    if (it != free_.end()) {
      *out = {it->second, it->first};
      free_.erase(it);
      return Status::ok();
    }
  }
  void* ptr = nullptr;
  cudaError_t err = cudaHostAlloc(&ptr, cap, cudaHostAllocPortable | cudaHostAllocMapped);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return Status(lanesSystemError, "could not pin " + std::to_string(cap >> 20) +
                                        " MiB of host memory for staging device data (" +
                                        cudaGetErrorString(err) +
                                        "); free host memory or raise the locked-memory limit "
                                        "(ulimit -l)");
  }
  *out = {ptr, cap};
  return Status::ok();
}

Status PinnedPool::prewarm(size_t blockBytes, int blocks) {
  std::vector<Block> taken;
  Status s = Status::ok();
  for (int i = 0; i < blocks && s; ++i) {
    Block b;
    s = acquire(blockBytes, &b);
    if (s) taken.push_back(b);
  }
  for (Block& b : taken) release(b);
  return s;
}

void PinnedPool::release(Block block) {
  if (block.ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  free_.emplace(block.capacity, block.ptr);
}

}  // namespace lanes
