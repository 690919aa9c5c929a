// The host-staged path's chunking (src/exec/staged_chunking.h): pure
// arithmetic every rank must compute alike. The all-reduce's inbox layout
// needs each chunk's nranks segments to fit one slot side by side.
#include <gtest/gtest.h>

#include <cstddef>

#include "exec/staged_chunking.h"

namespace lanes::staged {
namespace {

constexpr size_t kSlot = size_t{16} << 20;

// Segments of a chunk of `len` elements, as enqueueAllReduce cuts them.
size_t segmentElems(size_t len, size_t nranks, size_t align) {
  return roundUp(ceilDiv(len, nranks), align);
}

TEST(AllReduceChunks, SegmentsOfEveryChunkFitOneSlot) {
  for (size_t elem : {size_t{1}, size_t{2}, size_t{4}, size_t{8}}) {
    const size_t align = 16 / elem;
    for (size_t n :
         {size_t{2}, size_t{3}, size_t{5}, size_t{7}, size_t{8}, size_t{10}, size_t{64}}) {
      for (size_t slot : {size_t{64} << 10, size_t{1} << 20, kSlot}) {
        for (size_t count : {size_t{1}, size_t{4097}, (size_t{3} << 20) + 5,
                             (size_t{256} << 20) / elem, ((size_t{256} << 20) / elem) + 1}) {
          const size_t chunk = allReduceChunkElems(slot, count, elem, n, align);
          ASSERT_GT(chunk, 0u);
          EXPECT_EQ(chunk % (n * align), 0u) << "n " << n << " elem " << elem;
          EXPECT_LE(chunk * elem, pipelineChunkBytes(slot, count * elem))
              << "n " << n << " elem " << elem << " count " << count;
          for (size_t off = 0; off < count; off += chunk) {
            const size_t len = std::min(chunk, count - off);
            EXPECT_LE(n * segmentElems(len, n, align) * elem, slot)
                << "n " << n << " elem " << elem << " count " << count << " at " << off;
          }
        }
      }
    }
  }
}

TEST(AllReduceChunks, EqualChunksWithoutATinyTail) {
  // 256 MiB of float32 among 3 ranks: a slot holds 4194300 elements (a
  // multiple of 3 x 4), so 17 chunks of ~15 MiB, not 16 full ones and a 17th
  // of 64 elements.
  const size_t count = (size_t{256} << 20) / 4;
  const size_t chunk = allReduceChunkElems(kSlot, count, 4, 3, 4);
  EXPECT_EQ(ceilDiv(count, chunk), 17u);
  EXPECT_GE(count - 16 * chunk, chunk - 17 * 12) << "the last chunk is as large as the others";
  // Powers of two keep whole 16 MiB slots.
  EXPECT_EQ(allReduceChunkElems(kSlot, count, 4, 8, 4) * 4, kSlot);
  // A call smaller than a slot is cut into 8 chunks of at least 4 MiB.
  EXPECT_EQ(allReduceChunkElems(kSlot, (size_t{64} << 20) / 4, 4, 4, 4) * 4, size_t{8} << 20);
}

TEST(AllReduceChunks, ZeroAndTinyCounts) {
  EXPECT_EQ(allReduceChunkElems(kSlot, 0, 4, 4, 4), 0u);   // the loop issues nothing
  EXPECT_EQ(allReduceChunkElems(kSlot, 1, 4, 4, 4), 16u);  // one chunk of one unit
}

}  // namespace
}  // namespace lanes::staged
