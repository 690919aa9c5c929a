#include "transport/shm/ring_budget.h"

#include <algorithm>

#include "transport/common/byte_ring.h"

namespace lanes {

namespace {
constexpr size_t kPage = 4096;
}

size_t ringStride(size_t capacity) { return (ByteRing::bytesFor(capacity) + 63) & ~size_t{63}; }

size_t segmentBytes(size_t capacity, int lanes) {
  return (ringStride(capacity) * static_cast<size_t>(lanes) + kPage - 1) & ~(kPage - 1);
}

size_t RingBudget::capacityFor(size_t used, int lanes, size_t freeBytes) const {
  const size_t left = share_ > used ? share_ - used : 0;
  const size_t room = std::min(left, freeBytes) / 2;
  size_t capacity = std::max(asked_, kMinRingBytes);
  while (capacity > kMinRingBytes && segmentBytes(capacity, lanes) > room)
    capacity = std::max(kMinRingBytes, (capacity / 2) & ~(kRingGranule - 1));
  return capacity;
}

size_t RingBudget::peek(int lanes, size_t freeBytes) const {
  return capacityFor(used_.load(std::memory_order_relaxed), lanes, freeBytes);
}

size_t RingBudget::take(int lanes, size_t freeBytes) {
  size_t used = used_.load(std::memory_order_relaxed);
  for (;;) {
    const size_t capacity = capacityFor(used, lanes, freeBytes);
    if (used_.compare_exchange_weak(used, used + segmentBytes(capacity, lanes),
                                    std::memory_order_relaxed))
      return capacity;
  }
}

}  // namespace lanes
