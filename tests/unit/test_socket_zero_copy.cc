// MSG_ZEROCOPY in the TCP connection, against the real kernel over loopback:
// a ring's bytes that the kernel may still read are not reused.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "base/deadline.h"
#include "base/socket.h"
#include "transport/socket/socket_connection.h"
#include "transport/socket/zero_copy.h"

namespace lanes::testing {
namespace {

// The connection's frame header on the wire (transport/socket/socket_connection.cc).
struct WireHeader {
  uint16_t kind;
  uint16_t lane;
  uint32_t length;
  uint64_t offset;
};
static_assert(sizeof(WireHeader) == 16);

// A byte that differs between a stream offset and the same offset one ring
// further on, so a ring slot rewritten too early shows.
std::byte patternAt(uint64_t offset) {
  return std::byte{static_cast<uint8_t>((offset * 0x9E3779B97F4A7C15ull) >> 56)};
}

// A loopback TCP pair: the accepted end's receive buffer is small and the
// sender's send buffer large, so what the receiver does not read waits in
// the sender's queue.
void loopbackPair(Socket* sender, Socket* receiver) {
  SocketAddress address;
  ASSERT_TRUE(SocketAddress::parse("127.0.0.1", &address).isOk());
  Socket listener;
  ASSERT_TRUE(Socket::listen(&address, 1, &listener).isOk());
  const int small = 65536;
  ASSERT_EQ(::setsockopt(listener.fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
  ASSERT_TRUE(Socket::connect(address, Deadline::after(10), sender).isOk());
  const int large = 1 << 20;
  ASSERT_EQ(::setsockopt(sender->fd(), SOL_SOCKET, SO_SNDBUF, &large, sizeof(large)), 0);
  ASSERT_TRUE(listener.accept(Deadline::after(10), receiver).isOk());
}

// The kernel reports a zero-copy send only once it no longer needs the
// pages: not while the data waits in the send queue for a closed window.
TEST(SocketZeroCopy, TheKernelReportsASendOnlyOnceItLeftTheQueue) {
  Socket sender, receiver;
  loopbackPair(&sender, &receiver);
  ZeroCopySends zc;
  std::string why;
  ASSERT_TRUE(zc.enable(sender.fd(), 1, &why)) << why;
  EXPECT_TRUE(zc.wants(1));
  EXPECT_TRUE(zc.idle());
  std::vector<std::byte> data(1 << 20);
  size_t sent = 0;
  uint32_t last = 0;
  for (int i = 0; i < 64 && sent < data.size(); ++i) {
    ssize_t n = ::send(sender.fd(), data.data() + sent, data.size() - sent,
                       MSG_ZEROCOPY | MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n <= 0) break;
    last = zc.accepted();
    sent += static_cast<size_t>(n);
  }
  ASSERT_GT(sent, 0u);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(zc.reap(sender.fd()).isOk());
  EXPECT_FALSE(zc.done(last)) << "the last send's pages are still queued behind a full window";

  std::vector<std::byte> sink(sent);
  ASSERT_TRUE(receiver.recvAll(sink.data(), sent, Deadline::after(10)).isOk());
  const Deadline deadline = Deadline::after(10);
  while (!zc.idle() && !deadline.expired()) {
    ASSERT_TRUE(zc.reap(sender.fd()).isOk());
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(zc.idle());
  EXPECT_TRUE(zc.done(last));
  EXPECT_GT(zc.copiedReports(), 0u) << "loopback delivers a copy";
}

TEST(SocketZeroCopy, ZeroMinimumMeansNever) {
  Socket sender, receiver;
  loopbackPair(&sender, &receiver);
  ZeroCopySends zc;
  std::string why;
  EXPECT_TRUE(zc.enable(sender.fd(), 0, &why));
  EXPECT_FALSE(zc.wants(size_t{1} << 30));
}

// The connection's ring: its first bytes go out with MSG_ZEROCOPY into a
// window that closes at once (the peer here reads nothing yet and sends no
// credit), so the kernel still holds those pages. A second ring's worth
// posted meanwhile may take only what the kernel reported done; the bytes
// read at last must be the first ring's.
TEST(SocketZeroCopy, RingBytesTheKernelStillReadsAreNotReused) {
  Socket sender, receiver;
  loopbackPair(&sender, &receiver);
  SocketConnectionConfig config;
  config.rank = 0;
  config.peer = 1;
  config.peerAddress = "loopback";
  config.lanes = 1;
  config.threads = 1;
  config.socketsPerThread = 1;
  config.bufferBytes = 256 << 10;
  config.stripeBytes = 16 << 10;
  config.zeroCopyMinBytes = 4 << 10;
  auto establish = [&](const std::atomic<bool>&, std::vector<Socket>* sockets) {
    sockets->push_back(std::move(sender));
    return Status::ok();
  };
  std::unique_ptr<Connection> conn;
  ASSERT_TRUE(makeSocketConnection(config, establish, &conn).isOk());

  const size_t ring = config.bufferBytes;
  std::vector<std::byte> stream(2 * ring);
  for (size_t i = 0; i < stream.size(); ++i) stream[i] = patternAt(i);
  size_t posted = 0;
  const Deadline firstRing = Deadline::after(10);
  while (posted < ring && !firstRing.expired()) {
    size_t taken = 0;
    ASSERT_TRUE(conn->sendPort(0).post(stream.data() + posted, ring - posted, &taken).isOk());
    posted += taken;
  }
  ASSERT_EQ(posted, ring);
  // The whole first ring goes out with MSG_ZEROCOPY before the second is
  // posted: a small post sends the socket's backlog from the caller, as a
  // copy, and bytes the kernel copied are rightly free at once.
  const size_t frames = ring / config.stripeBytes;
  const Deadline pushed = Deadline::after(10);
  while (socketZeroCopyCounts(*conn)[0].sends < frames && !pushed.expired())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const ZeroCopyCounts pushedRing = socketZeroCopyCounts(*conn)[0];
  ASSERT_GE(pushedRing.sends, frames)
      << "the first ring went out as copies: " << pushedRing.sends << " zero-copy sends, "
      << pushedRing.copiedReports << " copied reports, zero copy "
      << (pushedRing.turnedOff ? "turned off" : "on")
      << " (ENOBUFS when the pinned pages pass RLIMIT_MEMLOCK also sends copies)";
  // The second ring, for a while: whatever post() takes overwrites slots of
  // the first, so it may take only what the kernel reported done.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < until && posted < stream.size()) {
    size_t taken = 0;
    ASSERT_TRUE(
        conn->sendPort(0).post(stream.data() + posted, stream.size() - posted, &taken).isOk());
    posted += taken;
  }
  EXPECT_LT(posted, stream.size()) << "the whole second ring was taken while the kernel held the "
                                      "first one's pages";

  // The frames of the first ring (no credit was sent, so no more), byte by byte.
  std::vector<std::byte> payload;
  size_t checked = 0;
  while (checked < ring) {
    WireHeader h;
    ASSERT_TRUE(receiver.recvAll(&h, sizeof(h), Deadline::after(10)).isOk());
    ASSERT_EQ(h.kind, 1) << "a data frame";
    ASSERT_EQ(h.offset, checked);
    payload.resize(h.length);
    ASSERT_TRUE(receiver.recvAll(payload.data(), h.length, Deadline::after(10)).isOk());
    for (size_t i = 0; i < h.length; ++i) {
      ASSERT_EQ(payload[i], patternAt(h.offset + i)) << "stream offset " << h.offset + i;
    }
    checked += h.length;
  }
  const std::vector<ZeroCopyCounts> counts = socketZeroCopyCounts(*conn);
  ASSERT_EQ(counts.size(), 1u);
  EXPECT_GT(counts[0].sends, 0u);
  conn->close();  // the rest never gets credit: no drain at destruction
}

}  // namespace
}  // namespace lanes::testing
