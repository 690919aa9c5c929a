// Shared-memory transport between thread-ranks of this process.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/populate_pages.h"
#include "tests/unit/fake_bootstrap.h"
#include "tests/unit/transport_streams.h"
#include "transport/shm/stale_segments.h"
#include "transport/transport.h"

namespace lanes::testing {
namespace {

// Sizes around the granule and the ring (1 MiB default), padded when posted.
const std::vector<size_t> kSizes = {
    1, 15, 16, 17, 100, 1000, 4095, 4096, 65537, 300000, (1u << 20) + 3, 3u << 20, 24};

std::vector<std::string> segmentsOf(const std::string& tag) {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    std::string name = entry.path().filename().string();
    if (name.rfind(tag, 0) == 0) found.push_back(name);
  }
  return found;
}

class ShmStreams : public ::testing::TestWithParam<int> {};

TEST_P(ShmStreams, AllLanesDeliverBytesInOrder) {
  int n = GetParam();
  FakeBootstrapGroup group(n);
  auto conns = connectAll(group, makeShmTransport, /*lanes=*/3);
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(conns[r].status.isOk()) << conns[r].status.message();
    ASSERT_EQ(conns[r].owned.size(), static_cast<size_t>(n - 1));
    for (auto& c : conns[r].owned) {
      EXPECT_STREQ(c->transportName(), "shm");
      EXPECT_EQ(c->lanes(), 3);
    }
  }
  // Nothing is made before a port is used; once both ends of every pair
  // have, the names are gone and the mappings live on.
  EXPECT_TRUE(segmentsOf(group.commTag()).empty());
  auto errors = exchangeAll(group, conns, kSizes, 60);
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  EXPECT_TRUE(segmentsOf(group.commTag()).empty());
}

// A budget of 1 MiB for 4 ranks (256 KiB each) cannot give three peers rings
// of the asked 1 MiB: each pair gets what is left, down to a page, the
// receiver takes the size its sender chose, and every byte still arrives.
TEST_P(ShmStreams, RingsShrinkToTheBudgetAndStillDeliver) {
  int n = GetParam();
  ASSERT_EQ(::setenv("LANES_SHM_BUDGET", "1M", 1), 0);
  FakeBootstrapGroup group(n);
  auto conns = connectAll(group, makeShmTransport, /*lanes=*/2);
  ::unsetenv("LANES_SHM_BUDGET");
  for (int r = 0; r < n; ++r) ASSERT_TRUE(conns[r].status.isOk()) << conns[r].status.message();
  auto errors = exchangeAll(group, conns, kSizes, 60);
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  EXPECT_TRUE(segmentsOf(group.commTag()).empty());
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmStreams, ::testing::Values(2, 3, 4));

TEST(ShmTransport, CanConnectOnlyOnOneHost) {
  auto t = makeShmTransport();
  RankInfo a, b;
  a.hostHash = 1;
  b.hostHash = 1;
  EXPECT_TRUE(t->canConnect(a, b));
  b.hostHash = 2;
  EXPECT_FALSE(t->canConnect(a, b));
}

// Only the pairs that talk get a segment, made by the sender's first post;
// the receiver's first look maps it and removes its name.
TEST(ShmTransport, RingsAreMadeOnFirstUseOnly) {
  FakeBootstrapGroup group(3);
  auto conns = connectAll(group, makeShmTransport, 2);
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(conns[r].status.isOk()) << conns[r].status.message();
  EXPECT_TRUE(segmentsOf(group.commTag()).empty());

  std::span<const std::byte> view;
  ASSERT_TRUE(conns[1].byPeer[0]->recvPort(1).peek(&view).isOk());
  EXPECT_TRUE(view.empty()) << "nothing was sent yet";

  uint8_t data[48] = {9};
  size_t taken = 0;
  ASSERT_TRUE(conns[0].byPeer[1]->sendPort(1).post(data, sizeof(data), &taken).isOk());
  ASSERT_EQ(taken, sizeof(data));
  EXPECT_EQ(segmentsOf(group.commTag()), std::vector<std::string>{group.commTag() + "-0-1"});

  ASSERT_TRUE(conns[1].byPeer[0]->recvPort(1).peek(&view).isOk());
  ASSERT_EQ(view.size(), sizeof(data));
  EXPECT_EQ(static_cast<uint8_t>(view[0]), 9);
  EXPECT_TRUE(segmentsOf(group.commTag()).empty());
  // The other lane of the same segment is mapped with it.
  ASSERT_TRUE(conns[1].byPeer[0]->recvPort(0).peek(&view).isOk());
  EXPECT_TRUE(view.empty());
}

// This process's mappings of files whose path holds `name`, in mapping
// order, from /proc/self/smaps: their size, resident bytes and bytes mapped
// by huge pages.
struct Mapping {
  size_t size = 0, resident = 0, huge = 0;
};
std::vector<Mapping> mappingsOf(const std::string& name) {
  std::vector<Mapping> found;
  std::ifstream smaps("/proc/self/smaps");
  bool ours = false;
  auto kib = [](const std::string& line) {
    return std::stoul(line.substr(line.find(':') + 1)) * 1024;
  };
  for (std::string line; std::getline(smaps, line);) {
    const bool header = !line.empty() && line.find(':') > line.find(' ');
    if (header) {
      ours = line.find(name) != std::string::npos;
      if (ours) found.emplace_back();
    } else if (ours && line.rfind("Size:", 0) == 0) {
      found.back().size = kib(line);
    } else if (ours && line.rfind("Rss:", 0) == 0) {
      found.back().resident = kib(line);
    } else if (ours && line.rfind("ShmemPmdMapped:", 0) == 0) {
      found.back().huge = kib(line);
    }
  }
  return found;
}

// Both ends map every page of a pair's rings when they first map them, so
// neither takes a fault per page on the first pass (each first touch of a
// page costs microseconds on a virtual machine): after one small message,
// the sender's and the receiver's mappings are resident in full. Huge pages
// would make them so anyway, so the test skips where shmem uses them.
TEST(ShmTransport, BothEndsMapTheRingsPagesAtOnce) {
  if (!populatePagesSupported()) GTEST_SKIP() << "this kernel has no MADV_POPULATE_WRITE (< 5.14)";
  if (!std::ifstream("/proc/self/smaps")) GTEST_SKIP() << "no /proc/self/smaps to read";
  FakeBootstrapGroup group(2);
  auto conns = connectAll(group, makeShmTransport, 2);
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(conns[r].status.isOk()) << conns[r].status.message();
  uint8_t data[48] = {7};
  size_t taken = 0;
  ASSERT_TRUE(conns[0].byPeer[1]->sendPort(0).post(data, sizeof(data), &taken).isOk());
  ASSERT_EQ(taken, sizeof(data));
  const std::string name = group.commTag() + "-0-1";
  ASSERT_EQ(mappingsOf(name).size(), 1u) << "the sender's mapping";
  std::span<const std::byte> view;
  ASSERT_TRUE(conns[1].byPeer[0]->recvPort(0).peek(&view).isOk());
  ASSERT_EQ(view.size(), sizeof(data));
  const std::vector<Mapping> both = mappingsOf(name);
  ASSERT_EQ(both.size(), 2u) << "the sender's and the receiver's mappings";
  for (const Mapping& m : both)
    if (m.huge > 0) GTEST_SKIP() << "shared memory is mapped by huge pages here";
  // One message touched a page or two of each lane's ring.
  for (const Mapping& m : both) {
    EXPECT_GT(m.size, size_t{64} << 10);
    EXPECT_EQ(m.resident, m.size);
  }
}

// A sender whose call is done may tear down before its receiver, still in
// the same call, has mapped the rings: what it posted must still arrive, and
// the receiver removes the name. After a failure (a close first) the sender
// removes it itself.
TEST(ShmTransport, BytesPostedBeforeTheSendersTeardownStillArrive) {
  FakeBootstrapGroup group(2);
  auto conns = connectAll(group, makeShmTransport, 2);
  ASSERT_TRUE(conns[0].status.isOk()) << conns[0].status.message();
  ASSERT_TRUE(conns[1].status.isOk()) << conns[1].status.message();
  uint8_t data[64];
  for (size_t i = 0; i < sizeof(data); ++i) data[i] = static_cast<uint8_t>(i + 1);
  size_t taken = 0;
  ASSERT_TRUE(conns[0].byPeer[1]->sendPort(1).post(data, sizeof(data), &taken).isOk());
  ASSERT_EQ(taken, sizeof(data));
  conns[0].owned.clear();
  EXPECT_EQ(segmentsOf(group.commTag()), std::vector<std::string>{group.commTag() + "-0-1"});

  std::span<const std::byte> view;
  ASSERT_TRUE(conns[1].byPeer[0]->recvPort(1).peek(&view).isOk());
  ASSERT_EQ(view.size(), sizeof(data));
  EXPECT_EQ(static_cast<uint8_t>(view[63]), 64);
  conns[1].byPeer[0]->recvPort(1).consume(view.size());
  EXPECT_TRUE(segmentsOf(group.commTag()).empty());
  // Everything read: now the close shows.
  EXPECT_EQ(conns[1].byPeer[0]->recvPort(1).peek(&view).code(), lanesRemoteError);

  ASSERT_TRUE(conns[1].byPeer[0]->sendPort(0).post(data, sizeof(data), &taken).isOk());
  conns[1].byPeer[0]->close();
  conns[1].owned.clear();
  EXPECT_TRUE(segmentsOf(group.commTag()).empty()) << "a failed sender left its name";
}

// With LANES_SHM_BUDGET=1M over 4 ranks a rank's share is 256 KiB: its
// first segment (2 lanes) may take half, so each ring holds 32 KiB, not the
// asked 1 MiB.
TEST(ShmTransport, ARingIsNoBiggerThanTheBudgetAllows) {
  ASSERT_EQ(::setenv("LANES_SHM_BUDGET", "1M", 1), 0);
  FakeBootstrapGroup group(4);
  auto conns = connectAll(group, makeShmTransport, 2);
  ::unsetenv("LANES_SHM_BUDGET");
  ASSERT_TRUE(conns[0].status.isOk()) << conns[0].status.message();
  std::vector<uint8_t> mib(size_t{1} << 20, 3);
  size_t taken = 0;
  ASSERT_TRUE(conns[0].byPeer[1]->sendPort(0).post(mib.data(), mib.size(), &taken).isOk());
  EXPECT_EQ(taken, 32768u);
}

// A restart reuses the communicator id: a segment the earlier run's sender
// left at this rank's name (unlocked, its creator gone) is removed at
// connect, so it is never taken for this run's.
TEST(ShmTransport, AnEarlierRunsSegmentIsNotTakenForThisRunsRings) {
  FakeBootstrapGroup group(2);
  const std::string old = "/dev/shm/" + group.commTag() + "-1-0";
  {
    const int fd = ::open(old.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    ASSERT_GE(fd, 0) << errno;
    ASSERT_EQ(::ftruncate(fd, 8192), 0);
    ::close(fd);
  }
  auto conns = connectAll(group, makeShmTransport, 2);
  ASSERT_TRUE(conns[0].status.isOk()) << conns[0].status.message();
  EXPECT_FALSE(std::filesystem::exists(old)) << "the earlier run's segment is still there";
  auto errors = exchangeAll(group, conns, {100, 4096, 65537}, 60);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// A name a finished sender left for its receiver is unlocked like a dead
// process's: the stale sweep's age counts from the hand-over, not from the
// segment's making, so a receiver that comes later still finds it.
TEST(ShmTransport, AHandedOverNameOutlivesTheStaleSweep) {
  FakeBootstrapGroup group(2);
  auto conns = connectAll(group, makeShmTransport, 2);
  ASSERT_TRUE(conns[0].status.isOk()) << conns[0].status.message();
  uint8_t data[32] = {5};
  size_t taken = 0;
  ASSERT_TRUE(conns[0].byPeer[1]->sendPort(0).post(data, sizeof(data), &taken).isOk());
  const std::string path = "/dev/shm/" + group.commTag() + "-0-1";
  const timespec hourAgo[2] = {{::time(nullptr) - 3600, 0}, {::time(nullptr) - 3600, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), hourAgo, 0), 0) << errno;
  conns[0].owned.clear();
  removeStaleSegments(group.commTag(), std::chrono::seconds(10));
  std::span<const std::byte> view;
  ASSERT_TRUE(conns[1].byPeer[0]->recvPort(0).peek(&view).isOk());
  ASSERT_EQ(view.size(), sizeof(data)) << "the sweep took the rings before their receiver came";
  EXPECT_EQ(static_cast<uint8_t>(view[0]), 5);
}

// A connection closed before it was ever used fails its own ports at once.
TEST(ShmTransport, CloseBeforeFirstUseFailsThePorts) {
  FakeBootstrapGroup group(2);
  auto conns = connectAll(group, makeShmTransport, 2);
  ASSERT_TRUE(conns[0].status.isOk()) << conns[0].status.message();
  Connection* c0 = conns[0].byPeer[1];
  c0->close();
  uint8_t data[16] = {};
  size_t taken = 0;
  EXPECT_EQ(c0->sendPort(0).post(data, sizeof(data), &taken).code(), lanesRemoteError);
  std::span<const std::byte> view;
  EXPECT_EQ(c0->recvPort(1).peek(&view).code(), lanesRemoteError);
  EXPECT_TRUE(segmentsOf(group.commTag()).empty()) << "a closed connection made rings";
}

TEST(ShmTransport, PeerCloseFailsPostAndPeek) {
  FakeBootstrapGroup group(2);
  auto conns = connectAll(group, makeShmTransport, 2);
  ASSERT_TRUE(conns[0].status.isOk()) << conns[0].status.message();
  ASSERT_TRUE(conns[1].status.isOk()) << conns[1].status.message();
  Connection* c0 = conns[0].byPeer[1];
  Connection* c1 = conns[1].byPeer[0];

  // Bytes sent before the close are still delivered, then peek fails. Rank 0
  // sent too (its rings exist) but rank 1 never looked: its close maps them
  // to close them, so rank 0's next post fails as well.
  uint8_t data[32] = {7};
  size_t taken = 0;
  ASSERT_TRUE(c0->sendPort(1).post(data, sizeof(data), &taken).isOk());
  ASSERT_TRUE(c1->sendPort(0).post(data, sizeof(data), &taken).isOk());
  ASSERT_EQ(taken, sizeof(data));
  c1->close();
  // What is left is rank 1's own segment, which rank 0 has not looked at yet.
  EXPECT_EQ(segmentsOf(group.commTag()), std::vector<std::string>{group.commTag() + "-1-0"});

  std::span<const std::byte> view;
  ASSERT_TRUE(c0->recvPort(0).peek(&view).isOk());
  ASSERT_EQ(view.size(), sizeof(data));
  EXPECT_EQ(static_cast<uint8_t>(view[0]), 7);
  c0->recvPort(0).consume(view.size());

  Status st = c0->recvPort(0).peek(&view);
  EXPECT_EQ(st.code(), lanesRemoteError);
  EXPECT_NE(st.message().find("peer rank 1 closed"), std::string::npos) << st.message();
  st = c0->recvPort(1).peek(&view);
  EXPECT_EQ(st.code(), lanesRemoteError);
  st = c0->sendPort(1).post(data, sizeof(data), &taken);
  EXPECT_EQ(st.code(), lanesRemoteError);
  EXPECT_EQ(taken, 0u);
}

// The least any plan needs (one ring's segments per rank) is checked at connect.
TEST(ShmTransport, TooSmallDevShmIsASystemErrorOnEveryRank) {
  ASSERT_EQ(::setenv("LANES_SHM_RING_BYTES", "1T", 1), 0);
  ASSERT_EQ(::setenv("LANES_SHM_BUDGET", "64T", 1), 0);
  FakeBootstrapGroup group(3);
  auto conns = connectAll(group, makeShmTransport, 2);
  ::unsetenv("LANES_SHM_RING_BYTES");
  ::unsetenv("LANES_SHM_BUDGET");
  for (int r = 0; r < 3; ++r) {
    EXPECT_FALSE(conns[r].status.isOk()) << "rank " << r;
    EXPECT_TRUE(conns[r].owned.empty());
  }
  // Each rank fails on its own /dev/shm check, with the sentence that says what to do.
  const Status& st = conns[0].status;
  EXPECT_EQ(st.code(), lanesSystemError) << st.message();
  EXPECT_NE(st.message().find("/dev/shm has"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("--shm-size"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("LANES_SHM_RING_BYTES"), std::string::npos) << st.message();
  EXPECT_TRUE(segmentsOf(group.commTag()).empty());
}

// A segment that cannot be made fails the post that needed it, naming both
// ranks and the cause; the receiver keeps waiting (its executor's deadline,
// or the communicator's failure notice, ends that), and nothing is left.
TEST(ShmTransport, AFailedRingFailsThePostThatNeededIt) {
  FakeBootstrapGroup group(2);
  // A live process's segment with rank 1's outgoing name (locked, so not
  // reclaimed as an earlier run's) makes rank 1's segment impossible.
  std::string held = "/dev/shm/" + group.commTag() + "-1-0";
  const int fd = ::open(held.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0) << errno;
  ASSERT_EQ(::flock(fd, LOCK_SH), 0) << errno;
  auto conns = connectAll(group, makeShmTransport, 2, /*timeoutSeconds=*/30);
  ASSERT_TRUE(conns[0].status.isOk()) << conns[0].status.message();
  ASSERT_TRUE(conns[1].status.isOk()) << conns[1].status.message();
  uint8_t data[16] = {};
  size_t taken = 0;
  Status st = conns[1].byPeer[0]->sendPort(0).post(data, sizeof(data), &taken);
  ::close(fd);
  std::filesystem::remove(held);
  EXPECT_EQ(st.code(), lanesSystemError) << st.message();
  EXPECT_NE(st.message().find("rank 1: shared-memory rings to rank 0"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("a live process holds this name"), std::string::npos) << st.message();
  // The failure sticks: the next post does not try again.
  EXPECT_EQ(conns[1].byPeer[0]->sendPort(1).post(data, sizeof(data), &taken).code(),
            lanesSystemError);
  std::span<const std::byte> view;
  EXPECT_TRUE(conns[0].byPeer[1]->recvPort(0).peek(&view).isOk());
  EXPECT_TRUE(view.empty());
  EXPECT_TRUE(segmentsOf(group.commTag()).empty());
}

}  // namespace
}  // namespace lanes::testing
