#include "transport/common/byte_ring.h"

#include <algorithm>
#include <cstring>

namespace lanes {

ByteRing::ByteRing(void* memory, size_t bytes, bool initialise) {
  header_ = static_cast<ByteRingHeader*>(memory);
  data_ = static_cast<std::byte*>(memory) + sizeof(ByteRingHeader);
  capacity_ = (bytes - sizeof(ByteRingHeader)) & ~(kRingGranule - 1);
  if (initialise) {
    header_->magic = kMagic;
    header_->capacity = capacity_;
    header_->head.store(0, std::memory_order_relaxed);
    header_->tail.store(0, std::memory_order_relaxed);
    header_->closed.store(0, std::memory_order_release);
  }
}

std::span<std::byte> ByteRing::writable() {
  uint64_t head = header_->head.load(std::memory_order_relaxed);
  uint64_t tail = header_->tail.load(std::memory_order_acquire);
  size_t free = capacity_ - static_cast<size_t>(head - tail);
  size_t offset = static_cast<size_t>(head % capacity_);
  size_t contiguous = std::min(free, capacity_ - offset);
  return {data_ + offset, contiguous};
}

void ByteRing::commit(size_t bytes) {
  header_->head.store(header_->head.load(std::memory_order_relaxed) + bytes,
                      std::memory_order_release);
}

size_t ByteRing::write(const void* src, size_t bytes) {
  size_t done = 0;
  auto* in = static_cast<const std::byte*>(src);
  while (done < bytes) {
    auto region = writable();
    // Publish in pieces so the reader starts on the first bytes while the
    // rest are still being copied.
    size_t n = std::min({region.size(), bytes - done, kRingCommitBytes});
    if (n == 0) break;
    std::memcpy(region.data(), in + done, n);
    commit(n);
    done += n;
  }
  return done;
}

std::span<const std::byte> ByteRing::readable() const {
  uint64_t tail = header_->tail.load(std::memory_order_relaxed);
  uint64_t head = header_->head.load(std::memory_order_acquire);
  size_t avail = static_cast<size_t>(head - tail);
  size_t offset = static_cast<size_t>(tail % capacity_);
  return {data_ + offset, std::min(avail, capacity_ - offset)};
}

void ByteRing::consume(size_t bytes) {
  header_->tail.store(header_->tail.load(std::memory_order_relaxed) + bytes,
                      std::memory_order_release);
}

}  // namespace lanes
