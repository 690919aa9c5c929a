// mapAllPages maps a shared-memory segment's pages into the process at once:
// touching them afterwards takes no page faults, where a mapping left alone
// takes one per page.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstddef>
#include <string>

#include "base/populate_pages.h"
#include "transport/shm/shm_segment.h"

namespace lanes {
namespace {

long minorFaultsOfThisThread() {
  rusage u{};
  ::getrusage(RUSAGE_THREAD, &u);
  return u.ru_minflt;
}

// Minor faults taken while writing a byte into every page of `seg`. Not
// instrumented: a sanitizer's check of each write would fault in its own
// shadow pages (AddressSanitizer: 32 for a 1 MiB segment) and count them too.
__attribute__((no_sanitize("address", "thread"))) long faultsWritingEveryPage(
    const ShmSegment& seg) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  auto* bytes = static_cast<volatile unsigned char*>(seg.data());
  const long before = minorFaultsOfThisThread();
  for (size_t at = 0; at < seg.size(); at += page) bytes[at] = 1;
  return minorFaultsOfThisThread() - before;
}

TEST(ShmSegment, MapAllPagesLeavesNoFaultForTheFirstTouch) {
  if (!populatePagesSupported())
    GTEST_SKIP() << "this kernel has no madvise(MADV_POPULATE_WRITE) (Linux < 5.14): "
                    "a segment's pages fault in as they are reached";
  constexpr size_t kBytes = size_t{1} << 20;  // a default ring
  const long pages = static_cast<long>(kBytes / static_cast<size_t>(::sysconf(_SC_PAGESIZE)));
  // Not "lanes-": every communicator init on this host sweeps those.
  const std::string name = "/lanestest-populate-" + std::to_string(::getpid());
  ShmSegment created;
  ASSERT_TRUE(ShmSegment::create(name, kBytes, kBytes, &created).isOk());
  ShmSegment opened, untouched;  // further mappings, as a peer process holds
  ASSERT_TRUE(ShmSegment::open(name, kBytes, &opened).isOk());
  ASSERT_TRUE(ShmSegment::open(name, kBytes, &untouched).isOk());
  created.unlink();
  // Huge pages would fault once per 2 MiB with or without the call.
  for (const ShmSegment* s : {&created, &opened, &untouched})
    (void)::madvise(s->data(), s->size(), MADV_NOHUGEPAGE);
  created.mapAllPages();
  opened.mapAllPages();
  // The measure itself: a mapping left alone faults on most of its pages.
  ASSERT_GT(faultsWritingEveryPage(untouched), pages / 2)
      << "writing a fresh mapping's " << pages << " pages took few faults: this count cannot "
      << "tell whether mapAllPages works here";
  // A few stray faults (the test's own stack) are allowed.
  EXPECT_LT(faultsWritingEveryPage(created), pages / 16) << "the creator's mapping";
  EXPECT_LT(faultsWritingEveryPage(opened), pages / 16) << "the opener's mapping";
}

}  // namespace
}  // namespace lanes
