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

// Not "lanes-": every communicator init on this host, other tests' included,
// sweeps those, and would race these tests for their segments.
std::string prefix() { return "lanestest-stale-" + std::to_string(::getpid()) + "-"; }

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
// block: a FIFO nobody writes would hang a plain open. A link to a stale
// file is not followed: the file's own name decides.
TEST(StaleSegments, FifosAndLinksWithThePrefixStayAndDoNotBlock) {
  const std::string fifo = prefix() + "fifo";
  const std::string link = prefix() + "link";
  const std::string target = "not-lanes-target-" + std::to_string(::getpid());
  ASSERT_EQ(::mkfifo(("/dev/shm/" + fifo).c_str(), 0600), 0) << errno;
  const int fd = ::open(("/dev/shm/" + target).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);
  ASSERT_EQ(::symlink(("/dev/shm/" + target).c_str(), ("/dev/shm/" + link).c_str()), 0) << errno;
  age(fifo);
  age(target);
  EXPECT_EQ(removeStaleSegments(prefix(), seconds(0)).removed, 0);
  EXPECT_TRUE(exists(fifo));
  EXPECT_TRUE(exists(target));
  struct stat st {};
  EXPECT_EQ(::lstat(("/dev/shm/" + link).c_str(), &st), 0);
  for (const std::string& n : {fifo, link, target}) ::unlink(("/dev/shm/" + n).c_str());
}

TEST(StaleSegments, TheSweepWarnsWhatItRemoved) {
  test::ScopedEnv level("LANES_DEBUG", "WARN");
  test::ScopedEnv subsys("LANES_DEBUG_SUBSYS", std::nullopt);
  test::LogFile log;
  logReloadConfig();
  const std::string name = prefix() + "warn";
  leaveBehindFromDeadProcess(name);
  age(name);
  removeStaleSegmentsAndWarn(0, prefix(), seconds(60));
  EXPECT_FALSE(exists(name));
  EXPECT_EQ(log.count("removed 1 shared-memory segment(s) from /dev/shm (1 MiB) that Lanes "
                      "processes which died before finishing their init had left there"),
            1u)
      << log.text();
}

// Communicator init sweeps every "lanes-" name. (Any concurrent init on this
// host may be the one that removes it; either way it must be gone.)
TEST(StaleSegments, CommunicatorInitRemovesThem) {
  const std::string name = "lanes-test-stale-" + std::to_string(::getpid()) + "-init";
  leaveBehindFromDeadProcess(name);
  age(name);
  lanesComm_t comm = nullptr;
  ASSERT_EQ(lanesCommInitAll(&comm, 1, nullptr), lanesSuccess) << lanesGetLastError(nullptr);
  EXPECT_EQ(lanesCommDestroy(comm), lanesSuccess);
  EXPECT_FALSE(exists(name));
}

// A restarted job reuses its communicator id, so its names: the creator
// takes over its own name from a dead earlier run at once, however young,
// but never from a live holder.
TEST(StaleSegments, ACreatorReclaimsItsNameFromADeadRunButNotFromALiveOne) {
  const std::string name = prefix() + "restart";
  leaveBehindFromDeadProcess(name);
  ShmSegment again;
  const Status s = ShmSegment::create("/" + name, kBytes, kBytes, &again);
  EXPECT_TRUE(s) << s.message();
  ShmSegment second;
  const Status busy = ShmSegment::create("/" + name, kBytes, kBytes, &second);
  EXPECT_EQ(busy.code(), lanesSystemError);
  EXPECT_NE(busy.message().find("a live process holds this name"), std::string::npos)
      << busy.message();
  EXPECT_TRUE(exists(name)) << "the live holder's segment stays";
}

}  // namespace
}  // namespace lanes
