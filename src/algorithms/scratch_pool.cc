#include "algorithms/scratch_pool.h"

#include <utility>

namespace lanes {

ScratchBuffer& ScratchBuffer::operator=(ScratchBuffer&& other) noexcept {
  if (this != &other) {
    giveBack();
    mem_ = std::move(other.mem_);
    bytes_ = other.bytes_;
    pool_ = other.pool_;
  }
  return *this;
}

ScratchBuffer::~ScratchBuffer() { giveBack(); }

void ScratchBuffer::giveBack() {
  if (mem_ != nullptr && pool_ != nullptr) pool_->keep(std::move(mem_), bytes_);
  mem_.reset();
}

ScratchBuffer ScratchPool::take(ScratchPool* pool, size_t bytes) {
  bytes = bytes == 0 ? 1 : bytes;
  if (pool != nullptr) {
    std::lock_guard<std::mutex> lock(pool->mutex_);
    auto it = pool->free_.lower_bound(bytes);
    if (it != pool->free_.end() && it->first / 2 <= bytes) {
      ScratchBuffer out(std::move(it->second), it->first, pool);
      pool->free_.erase(it);
      return out;
    }
  }
  return ScratchBuffer(std::make_unique_for_overwrite<std::byte[]>(bytes), bytes, pool);
}

size_t ScratchPool::keptBuffers() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return free_.size();
}

void ScratchPool::keep(std::unique_ptr<std::byte[]> mem, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_.emplace(bytes, std::move(mem));
  // The smallest go first: they are the cheapest to make again.
  while (free_.size() > kKeptBuffers) free_.erase(free_.begin());
}

}  // namespace lanes
