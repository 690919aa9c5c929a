// Segments a dead process left in /dev/shm are removed; a live creator's are
// not, however old, nor young ones, nor other names (stale_segments.h).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "base/log.h"
#include "lanes/lanes.h"
#include "tests/common/log_file.h"
#include "tests/common/scoped_env.h"
#include "transport/shm/shm_segment.h"
#include "transport/shm/stale_segments.h"

namespace lanes {
namespace {

using std::chrono::seconds;

constexpr size_t kBytes = 64 << 10;

bool exists(const std::string& name) {
  struct stat st {};
  return ::stat(("/dev/shm/" + name).c_str(), &st) == 0;
}

// Sets the segment's modification time an hour back, as if left long ago.
void age(const std::string& name) {
  const timespec times[2] = {{::time(nullptr) - 3600, 0}, {::time(nullptr) - 3600, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, ("/dev/shm/" + name).c_str(), times, 0), 0) << errno;
}

// A child process creates `name` through ShmSegment and dies without
// unlinking it, as a SIGKILLed rank would.
void leaveBehindFromDeadProcess(const std::string& name) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ShmSegment seg;
    const Status s = ShmSegment::create("/" + name, kBytes, kBytes, &seg);
    ::_exit(s.isOk() ? 0 : 1);  // no destructor: the name stays
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_TRUE(exists(name));
}

std::string prefix() { return "lanes-test-stale-" + std::to_string(::getpid()) + "-"; }

TEST(StaleSegments, ADeadCreatorsSegmentIsRemovedWithItsSize) {
  const std::string name = prefix() + "dead";
  leaveBehindFromDeadProcess(name);
  age(name);
  const StaleSegments s = removeStaleSegments(prefix(), seconds(60));
  EXPECT_EQ(s.removed, 1);
  EXPECT_GE(s.bytes, kBytes) << "the reserved pages are what was freed";
  EXPECT_FALSE(exists(name));
}

TEST(StaleSegments, ALiveCreatorsSegmentStaysHoweverOld) {
  const std::string name = prefix() + "live-here";
  ShmSegment mine;
  ASSERT_TRUE(ShmSegment::create("/" + name, kBytes, kBytes, &mine));
  age(name);

  // Also a creator in another process, alive until told to go.
  const std::string other = prefix() + "live-child";
  int toChild[2], fromChild[2];
  ASSERT_EQ(::pipe(toChild), 0);
  ASSERT_EQ(::pipe(fromChild), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ShmSegment seg;
    const char ok = ShmSegment::create("/" + other, kBytes, kBytes, &seg).isOk() ? 'y' : 'n';
    if (::write(fromChild[1], &ok, 1) != 1) ::_exit(2);
    char go;
    if (::read(toChild[0], &go, 1) != 1) ::_exit(3);
    ::_exit(0);  // dies holding the name: stale from here on
  }
  char ok = 0;
  ASSERT_EQ(::read(fromChild[0], &ok, 1), 1);
  ASSERT_EQ(ok, 'y');
  age(other);

  EXPECT_EQ(removeStaleSegments(prefix(), seconds(60)).removed, 0);
  EXPECT_TRUE(exists(name));
  EXPECT_TRUE(exists(other));

  ASSERT_EQ(::write(toChild[1], "g", 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_EQ(removeStaleSegments(prefix(), seconds(60)).removed, 1) << "the child's, now stale";
  EXPECT_FALSE(exists(other));
  EXPECT_TRUE(exists(name));
  for (int fd : {toChild[0], toChild[1], fromChild[0], fromChild[1]}) ::close(fd);
}

TEST(StaleSegments, YoungAndOtherNamesStay) {
  const std::string young = prefix() + "young";
  leaveBehindFromDeadProcess(young);
  EXPECT_EQ(removeStaleSegments(prefix(), seconds(60)).removed, 0) << "created just now";
  EXPECT_TRUE(exists(young));

  const std::string foreign = "not-lanes-" + std::to_string(::getpid());
  const int fd = ::open(("/dev/shm/" + foreign).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);
  age(foreign);
  age(young);
  EXPECT_EQ(removeStaleSegments(prefix(), seconds(60)).removed, 1);
  EXPECT_FALSE(exists(young));
  EXPECT_TRUE(exists(foreign)) << "only names with the prefix are Lanes'";
  ::unlink(("/dev/shm/" + foreign).c_str());
}

// What is not a regular file is not a segment, and opening it must not
// block: a FIFO nobody writes would hang a plain open.
TEST(StaleSegments, FifosAndLinksWithThePrefixStayAndDoNotBlock) {
  const std::string fifo = prefix() + "fifo";
  const std::string link = prefix() + "link";
  ASSERT_EQ(::mkfifo(("/dev/shm/" + fifo).c_str(), 0600), 0) << errno;
  ASSERT_EQ(::symlink("/dev/null", ("/dev/shm/" + link).c_str()), 0) << errno;
  age(fifo);
  EXPECT_EQ(removeStaleSegments(prefix(), seconds(0)).removed, 0);
  EXPECT_TRUE(exists(fifo));
  struct stat st {};
  EXPECT_EQ(::lstat(("/dev/shm/" + link).c_str(), &st), 0);
  ::unlink(("/dev/shm/" + fifo).c_str());
  ::unlink(("/dev/shm/" + link).c_str());
}

// Communicator init sweeps every "lanes-" name and says what it removed.
TEST(StaleSegments, CommunicatorInitRemovesThemAndWarns) {
  test::ScopedEnv level("LANES_DEBUG", "WARN");
  test::ScopedEnv subsys("LANES_DEBUG_SUBSYS", std::nullopt);
  test::LogFile log;
  logReloadConfig();
  const std::string name = prefix() + "init";
  leaveBehindFromDeadProcess(name);
  age(name);
  lanesComm_t comm = nullptr;
  ASSERT_EQ(lanesCommInitAll(&comm, 1, nullptr), lanesSuccess) << lanesGetLastError(nullptr);
  EXPECT_EQ(lanesCommDestroy(comm), lanesSuccess);
  EXPECT_FALSE(exists(name));
  EXPECT_NE(log.text().find("shared-memory segment(s) from /dev/shm"), std::string::npos)
      << log.text();
}

}  // namespace
}  // namespace lanes
