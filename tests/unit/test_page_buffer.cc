// PageBuffer: pages of its own, writable, moved without copying, made
// resident ahead of use, and a mapping the kernel refuses says why.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <vector>

#include "base/page_buffer.h"

namespace lanes::testing {
namespace {

TEST(PageBuffer, HoldsWritablePagesAndMovesThem) {
  PageBuffer a(1 << 20);
  ASSERT_TRUE(a.valid());
  EXPECT_EQ(a.error(), 0);
  a.get()[0] = std::byte{1};
  a.get()[(1 << 20) - 1] = std::byte{2};
  std::byte* at = a.get();
  PageBuffer b = std::move(a);
  EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): moved-from is empty
  ASSERT_EQ(b.get(), at);
  EXPECT_EQ(b.get()[0], std::byte{1});
  EXPECT_EQ(b.get()[(1 << 20) - 1], std::byte{2});
  b = PageBuffer(4096);
  ASSERT_TRUE(b.valid());
  EXPECT_NE(b.get(), nullptr);
}

TEST(PageBuffer, AMappingTheKernelRefusesSaysWhy) {
  const PageBuffer huge(size_t{1} << 62);
  EXPECT_FALSE(huge.valid());
  EXPECT_EQ(huge.get(), nullptr);
  EXPECT_EQ(huge.error(), ENOMEM);
}

// How many of the buffer's first `bytes` are in resident pages (mincore).
size_t residentBytes(const PageBuffer& b, size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> pages((bytes + page - 1) / page);
  if (mincore(b.get(), bytes, pages.data()) != 0) return SIZE_MAX;
  size_t resident = 0;
  for (unsigned char p : pages) resident += (p & 1) ? page : 0;
  return resident;
}

TEST(PageBuffer, PrefaultMakesPagesResidentAheadInPieces) {
  const size_t bytes = 4 * PageBuffer::kPrefaultBytes;
  PageBuffer b(bytes);
  ASSERT_TRUE(b.valid());
  if (!populatePagesSupported())
    GTEST_SKIP() << "this kernel has no madvise(MADV_POPULATE_WRITE) (Linux < 5.14): "
                    "prefault() leaves the pages to fault as reached";
  // Whole huge pages would make more resident than prefault() asked for
  // (a kernel without them refuses the advice, and needs none).
  (void)madvise(b.get(), bytes, MADV_NOHUGEPAGE);
  ASSERT_EQ(residentBytes(b, bytes), 0u) << "a fresh mapping has no pages yet";
  b.prefault(100);  // at least a piece, not just the page asked for
  EXPECT_EQ(residentBytes(b, bytes), PageBuffer::kPrefaultBytes);
  b.prefault(PageBuffer::kPrefaultBytes);  // already resident: nothing more
  EXPECT_EQ(residentBytes(b, bytes), PageBuffer::kPrefaultBytes);
  b.prefault(PageBuffer::kPrefaultBytes + 1);
  EXPECT_EQ(residentBytes(b, bytes), 2 * PageBuffer::kPrefaultBytes);
  PageBuffer moved = std::move(b);
  moved.prefault(10 * bytes);  // past the end: up to the end
  EXPECT_EQ(residentBytes(moved, bytes), bytes);
  PageBuffer none;
  none.prefault(1);  // no mapping: nothing to do
  EXPECT_FALSE(none.valid());
}

}  // namespace
}  // namespace lanes::testing
