// A shared-memory segment's pages are mapped into each process that maps it,
// when it maps it: touching them afterwards takes no page faults.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <string>

#include "base/populate_pages.h"
#include "transport/shm/shm_segment.h"

namespace lanes {
namespace {

long minorFaults() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// Minor faults taken while writing a byte into every page of `seg`.
long faultsWritingEveryPage(const ShmSegment& seg) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  auto* bytes = static_cast<volatile unsigned char*>(seg.data());
  const long before = minorFaults();
  for (size_t at = 0; at < seg.size(); at += page) bytes[at] = 1;
  return minorFaults() - before;
}

TEST(ShmSegment, CreatorAndOpenerHaveEveryPageMappedAtOnce) {
  {
    void* probe = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(probe, MAP_FAILED);
    const bool populates = populatePages(probe, 4096) || errno != EINVAL;
    ::munmap(probe, 4096);
    if (!populates)
      GTEST_SKIP() << "this kernel has no madvise(MADV_POPULATE_WRITE) (Linux < 5.14): "
                      "a segment's pages fault in as they are reached";
  }
  constexpr size_t kBytes = size_t{1} << 20;  // a default ring
  const size_t pages = kBytes / static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  // Not "lanes-": every communicator init on this host sweeps those.
  const std::string name = "/lanestest-populate-" + std::to_string(::getpid());
  ShmSegment created;
  ASSERT_TRUE(ShmSegment::create(name, kBytes, kBytes, &created).isOk());
  ShmSegment opened;  // a second mapping, as the peer process holds
  ASSERT_TRUE(ShmSegment::open(name, kBytes, &opened).isOk());
  created.unlink();
  // A page apiece would be `pages` faults per mapping; a few stray ones
  // (the test's own stack or heap) are allowed.
  const long slack = static_cast<long>(pages / 16);
  EXPECT_LT(faultsWritingEveryPage(created), slack)
      << "the creator's mapping, " << pages << " pages";
  EXPECT_LT(faultsWritingEveryPage(opened), slack) << "the opener's mapping, " << pages << " pages";
}

}  // namespace
}  // namespace lanes
