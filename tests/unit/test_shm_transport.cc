// Shared-memory transport between thread-ranks of this process.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "tests/unit/fake_bootstrap.h"
#include "tests/unit/transport_streams.h"
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
  // The names are gone as soon as connect returns; the mappings live on.
  EXPECT_TRUE(segmentsOf(group.commTag()).empty());
  auto errors = exchangeAll(group, conns, kSizes, 60);
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
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

TEST(ShmTransport, PeerCloseFailsPostAndPeek) {
  FakeBootstrapGroup group(2);
  auto conns = connectAll(group, makeShmTransport, 2);
  ASSERT_TRUE(conns[0].status.isOk()) << conns[0].status.message();
  ASSERT_TRUE(conns[1].status.isOk()) << conns[1].status.message();
  Connection* c0 = conns[0].byPeer[1];
  Connection* c1 = conns[1].byPeer[0];

  // Bytes sent before the close are still delivered, then peek fails.
  uint8_t data[32] = {7};
  size_t taken = 0;
  ASSERT_TRUE(c1->sendPort(0).post(data, sizeof(data), &taken).isOk());
  ASSERT_EQ(taken, sizeof(data));
  c1->close();

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

TEST(ShmTransport, TooSmallDevShmIsASystemErrorOnEveryRank) {
  ASSERT_EQ(::setenv("LANES_SHM_RING_BYTES", "1T", 1), 0);
  FakeBootstrapGroup group(3);
  auto conns = connectAll(group, makeShmTransport, 2);
  ::unsetenv("LANES_SHM_RING_BYTES");
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

TEST(ShmTransport, OneRankFailingFailsTheOthersWithoutWaiting) {
  FakeBootstrapGroup group(2);
  // A live process's segment with rank 1's outgoing name (locked, so not
  // reclaimed as an earlier run's) makes rank 1's O_EXCL create fail.
  std::string held = "/dev/shm/" + group.commTag() + "-1-0";
  const int fd = ::open(held.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0) << errno;
  ASSERT_EQ(::flock(fd, LOCK_SH), 0) << errno;
  auto conns = connectAll(group, makeShmTransport, 2, /*timeoutSeconds=*/30);
  ::close(fd);
  std::filesystem::remove(held);
  EXPECT_EQ(conns[1].status.code(), lanesSystemError) << conns[1].status.message();
  EXPECT_EQ(conns[0].status.code(), lanesRemoteError) << conns[0].status.message();
  EXPECT_NE(conns[0].status.message().find("rank 1"), std::string::npos);
  EXPECT_TRUE(segmentsOf(group.commTag()).empty());
}

}  // namespace
}  // namespace lanes::testing
