// RingBudget: the ring sizes a rank's lazily made connections get.
#include <gtest/gtest.h>

#include <cstdint>

#include "transport/shm/ring_budget.h"

namespace lanes {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// With room to spare every connection gets the asked-for ring: 2 to 8 ranks
// under the default budget never notice it.
TEST(RingBudget, PlentyOfRoomGivesTheAskedRing) {
  RingBudget budget(kMiB, 64 * kMiB);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(budget.take(2, SIZE_MAX), kMiB) << "connection " << i;
  EXPECT_EQ(budget.used(), 7 * segmentBytes(kMiB, 2));
}

// Each connection takes at most half of what is left, so sizes halve, stop
// at a page, and a rank with many peers stays near its share.
TEST(RingBudget, LaterRingsShrinkToAPage) {
  const size_t share = 2 * kMiB;
  RingBudget budget(kMiB, share);
  size_t last = SIZE_MAX;
  for (int i = 0; i < 255; ++i) {
    const size_t capacity = budget.take(2, SIZE_MAX);
    EXPECT_LE(capacity, last) << "connection " << i;
    EXPECT_GE(capacity, RingBudget::kMinRingBytes);
    EXPECT_EQ(capacity % 16, 0u);
    last = capacity;
  }
  EXPECT_EQ(last, RingBudget::kMinRingBytes);
  // Beyond the share only by the page-sized rings of the peers past it.
  EXPECT_LE(budget.used(), share + 255 * segmentBytes(RingBudget::kMinRingBytes, 2));
  EXPECT_EQ(RingBudget(kMiB, share).take(2, SIZE_MAX), 256 * 1024u)
      << "the first segment (two rings and headers) of a 2 MiB share takes at most half of it";
}

// Free /dev/shm bounds the ring as the share does.
TEST(RingBudget, FreeDevShmBoundsTheRing) {
  RingBudget budget(kMiB, 512 * kMiB);
  EXPECT_LE(segmentBytes(budget.peek(2, 4 * kMiB), 2), 2 * kMiB);
  EXPECT_EQ(budget.peek(2, 0), RingBudget::kMinRingBytes);
  EXPECT_EQ(budget.used(), 0u) << "peek takes nothing";
}

}  // namespace
}  // namespace lanes
