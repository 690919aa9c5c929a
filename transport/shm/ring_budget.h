// RingBudget: how big the shared-memory rings of one rank's connections are.
// A connection makes its rings when first used (only the peers a plan talks
// to get any), and its segment takes at most half of what is left of the
// rank's share of LANES_SHM_BUDGET and of the free /dev/shm, or the smallest
// ring where even that does not fit. With a few dozen local ranks the first
// rings keep the asked-for size; a rank that talks to every peer gets smaller
// rings for the later ones, and the sum over a host stays within the budget
// plus the smallest rings however many ranks it holds.
#pragma once

#include <atomic>
#include <cstddef>

#include "transport/common/byte_ring.h"

namespace lanes {

class RingBudget {
 public:
  // Rings never shrink below this: a ring and its header in one page (two
  // lanes' segment is two pages), still many times the granule.
  static constexpr size_t kMinRingBytes = 4096 - sizeof(ByteRingHeader);

  // `askedRing`: LANES_SHM_RING_BYTES (granule-padded); `share`: this rank's
  // bytes of the host budget.
  RingBudget(size_t askedRing, size_t share) : asked_(askedRing), share_(share) {}

  // Ring capacity for a new connection of `lanes` rings, given `freeBytes` in
  // /dev/shm; takes its segment's bytes from the share.
  size_t take(int lanes, size_t freeBytes);
  // The capacity take() would choose now, without taking it.
  size_t peek(int lanes, size_t freeBytes) const;
  size_t used() const { return used_.load(std::memory_order_relaxed); }

 private:
  size_t capacityFor(size_t used, int lanes, size_t freeBytes) const;

  size_t asked_;
  size_t share_;
  std::atomic<size_t> used_{0};
};

// Bytes from one ring of `capacity` to the next in a segment: each starts
// on its own cache line.
size_t ringStride(size_t capacity);
// Bytes of a segment of `lanes` rings of `capacity`, in whole pages (what
// it takes of /dev/shm).
size_t segmentBytes(size_t capacity, int lanes);

}  // namespace lanes
