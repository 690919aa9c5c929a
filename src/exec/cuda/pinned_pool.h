// Pinned (page-locked, device-mapped) host blocks for staging device data,
// cached by size: cudaHostAlloc costs milliseconds, a collective must not.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>

#include "base/status.h"

namespace lanes {

class PinnedPool {
 public:
  struct Block {
    void* ptr = nullptr;
    size_t capacity = 0;
  };
  PinnedPool() = default;
  ~PinnedPool();
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;

  Status acquire(size_t bytes, Block* out);
  // Pins `blocks` blocks of `blockBytes` now. Pinning may wait for the whole
  // device, which inside a call could wait on work queued behind that call's
  // own stream; done at init it costs nothing of the kind.
  Status prewarm(size_t blockBytes, int blocks);
  void release(Block block);

 private:
  std::mutex mutex_;
  std::multimap<size_t, void*> free_;  // capacity -> block
};

}  // namespace lanes
