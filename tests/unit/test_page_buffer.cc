// PageBuffer: pages of its own, writable, moved without copying, and a
// mapping the kernel refuses says why.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>

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

}  // namespace
}  // namespace lanes::testing
