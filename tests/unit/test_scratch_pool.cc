// Schedules' scratch comes from the communicator's pool and goes back to it
// (algorithms/scratch_pool.h): a repeated large call reuses one buffer.
#include <gtest/gtest.h>

#include "algorithms/schedule.h"
#include "algorithms/scratch_pool.h"

namespace lanes {
namespace {

TEST(ScratchPool, ABufferGoesBackAndIsLentAgain) {
  ScratchPool pool;
  std::byte* first = nullptr;
  {
    Schedule s(pool);
    first = s.allocScratch(size_t{1} << 20);
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(pool.keptBuffers(), 0u);
  }
  EXPECT_EQ(pool.keptBuffers(), 1u);
  Schedule again(pool);
  EXPECT_EQ(again.allocScratch(size_t{1} << 20), first);  // the same bytes, no new pages
  EXPECT_EQ(pool.keptBuffers(), 0u);
}

TEST(ScratchPool, TakesTheSmallestThatFitsWithoutWastingMoreThanHalf) {
  ScratchPool pool;
  std::byte *small = nullptr, *large = nullptr;
  {
    ScratchBuffer a = pool.take(1000), b = pool.take(100000);
    small = a.data();
    large = b.data();
  }
  ASSERT_EQ(pool.keptBuffers(), 2u);
  ScratchBuffer tiny = pool.take(10);  // 1000 would waste more than half
  EXPECT_NE(tiny.data(), small);
  EXPECT_NE(tiny.data(), large);
  ScratchBuffer mid = pool.take(800);
  EXPECT_EQ(mid.data(), small);
  ScratchBuffer big = pool.take(60000);
  EXPECT_EQ(big.data(), large);
  ScratchBuffer none = pool.take(200000);  // nothing that large is kept
  EXPECT_NE(none.data(), nullptr);
}

TEST(ScratchPool, KeepsAtMostItsLimit) {
  ScratchPool pool;
  {
    std::vector<ScratchBuffer> many;
    for (size_t i = 0; i < ScratchPool::kKeptBuffers + 3; ++i)
      many.push_back(pool.take(4096 * (i + 1)));
  }
  EXPECT_EQ(pool.keptBuffers(), ScratchPool::kKeptBuffers);
  ScratchBuffer own = pool.take(0);  // at least a byte
  EXPECT_NE(own.data(), nullptr);
  ScratchBuffer moved = std::move(own);
  EXPECT_NE(moved.data(), nullptr);
}

}  // namespace
}  // namespace lanes
