#include "algorithms/scratch_pool.h"

#include <iterator>
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

ScratchBuffer ScratchPool::take(size_t bytes) {
  bytes = bytes == 0 ? 1 : bytes;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.lower_bound(bytes);
    if (it != free_.end() && it->first / 2 <= bytes) {
      ScratchBuffer out(std::move(it->second), it->first, this);
      keptBytes_ -= it->first;
      free_.erase(it);
      return out;
    }
  }
  return ScratchBuffer(std::make_unique_for_overwrite<std::byte[]>(bytes), bytes, this);
}

size_t ScratchPool::keptBuffers() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return free_.size();
}

void ScratchPool::keep(std::unique_ptr<std::byte[]> mem, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (bytes > kKeptBytes) return;  // too large to hold between calls
  free_.emplace(bytes, std::move(mem));
  keptBytes_ += bytes;
  // Over the count, the smallest go first (the cheapest to make again); over
  // the bytes, the largest (the most to hold).
  while (free_.size() > kKeptBuffers) {
    keptBytes_ -= free_.begin()->first;
    free_.erase(free_.begin());
  }
  while (keptBytes_ > kKeptBytes) {
    auto largest = std::prev(free_.end());
    keptBytes_ -= largest->first;
    free_.erase(largest);
  }
}

}  // namespace lanes
