// TCP transport between thread-ranks of this process, over 127.0.0.1.
#include <dirent.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <initializer_list>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <thread>

#include "base/log.h"
#include "base/sanitizers.h"
#include "tests/common/log_file.h"
#include "tests/unit/fake_bootstrap.h"
#include "tests/unit/transport_streams.h"
#include "transport/socket/socket_connection.h"
#include "transport/socket/socket_side.h"
#include "transport/socket/zero_copy.h"
#include "transport/transport.h"

namespace lanes::testing {
namespace {

using ::lanes::kUnderThreadSanitizer;

// Sets environment variables for one test and restores them after.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (auto [k, v] : vars) {
      const char* old = std::getenv(k);
      saved_[k] = old ? std::optional<std::string>(old) : std::nullopt;
      ::setenv(k, v, 1);
    }
  }
  ~ScopedEnv() {
    for (auto& [k, v] : saved_) {
      if (v) {
        ::setenv(k.c_str(), v->c_str(), 1);
      } else {
        ::unsetenv(k.c_str());
      }
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

// This process's descriptors whose link target starts with `prefix`
// ("socket:", "anon_inode:[eventfd]").
int countFds(const std::string& prefix) {
  int n = 0;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  while (dirent* e = ::readdir(dir)) {
    char target[256] = {};
    std::string path = std::string("/proc/self/fd/") + e->d_name;
    ssize_t len = ::readlink(path.c_str(), target, sizeof(target) - 1);
    if (len > 0 && std::string(target, static_cast<size_t>(len)).rfind(prefix, 0) == 0) ++n;
  }
  ::closedir(dir);
  return n;
}

// This process's sockets above `base`, once they number `want`, else after
// 10 s: the hub closes a refused dial's sockets as it reads their hellos,
// after the ranks already moved on.
int settledSockets(int base, int want) {
  Deadline deadline = Deadline::after(10);
  int now = countFds("socket:") - base;
  while (now != want && !deadline.expired()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    now = countFds("socket:") - base;
  }
  return now;
}

const std::vector<size_t> kSizes = {1,        15,    16,     17,     100,    1000, 4095,
                                    4096,     65537, 131072, 131088, 300000, 24,   (1u << 20) + 3,
                                    3u << 20, 8};

void expectConnected(const std::vector<RankConnections>& conns, int n, int lanes) {
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(conns[r].status.isOk()) << "rank " << r << ": " << conns[r].status.message();
    ASSERT_EQ(conns[r].owned.size(), static_cast<size_t>(n - 1));
    for (auto& c : conns[r].owned) {
      EXPECT_STREQ(c->transportName(), "tcp");
      EXPECT_EQ(c->lanes(), lanes);
    }
  }
}

struct StreamCase {
  int ranks;
  const char* ringBytes;
  const char* stripeBytes;
  const char* mover;  // LANES_SOCKET_MOVER
};

std::string caseName(const StreamCase& c) {
  return std::to_string(c.ranks) + "ranks_ring" + c.ringBytes + "_stripe" + c.stripeBytes + "_" +
         c.mover;
}

void PrintTo(const StreamCase& c, std::ostream* os) { *os << caseName(c); }

class SocketStreams : public ::testing::TestWithParam<StreamCase> {};

TEST_P(SocketStreams, AllLanesDeliverBytesInOrder) {
  StreamCase c = GetParam();
  ScopedEnv env({{"LANES_SOCKET_IFNAME", "lo"},
                 {"LANES_SOCKET_RING_BYTES", c.ringBytes},
                 {"LANES_SOCKET_STRIPE_BYTES", c.stripeBytes},
                 {"LANES_SOCKET_MOVER", c.mover}});
  FakeBootstrapGroup group(c.ranks, /*sameHost=*/false);
  auto conns = connectAll(group, makeSocketTransport, /*lanes=*/3);
  expectConnected(conns, c.ranks, 3);
  auto errors = exchangeAll(group, conns, kSizes, 90);
  for (int r = 0; r < c.ranks; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  // The bytes took the path the mover names.
  const bool engine = std::string(c.mover) == "engine";
  for (int r = 0; r < c.ranks; ++r) {
    for (auto& conn : conns[r].owned) {
      const uint64_t fromCaller = socketMoveCounts(*conn).sentFromCaller;
      if (engine) {
        EXPECT_GT(fromCaller, 0u) << "rank " << r << " to " << conn->peer();
      } else {
        EXPECT_EQ(fromCaller, 0u) << "rank " << r << " to " << conn->peer();
      }
    }
  }
}

// Default buffers, and small ones where credit flow control and striping
// across sockets (stripes much smaller than the messages) do the work; the
// workers moving every byte, and the engine's calls moving them (sends from
// the caller's bytes, a frame's rest through the ring).
INSTANTIATE_TEST_SUITE_P(
    Ranks, SocketStreams,
    ::testing::Values(StreamCase{2, "4M", "512K", "workers"},
                      StreamCase{3, "4M", "128K", "workers"},
                      StreamCase{4, "4M", "512K", "workers"}, StreamCase{2, "64K", "4K", "workers"},
                      StreamCase{3, "64K", "4K", "workers"}, StreamCase{4, "32K", "4K", "workers"},
                      StreamCase{2, "4M", "512K", "engine"}, StreamCase{3, "4M", "128K", "engine"},
                      StreamCase{4, "4M", "512K", "engine"}, StreamCase{2, "64K", "4K", "engine"},
                      StreamCase{3, "64K", "4K", "engine"}, StreamCase{4, "32K", "4K", "engine"}),
    [](const ::testing::TestParamInfo<StreamCase>& info) { return caseName(info.param); });

// Two ranks over loopback whose engines move the bytes, 2 workers each, the
// sockets opened and the workers started by a first exchange.
class SocketEngineMovedPair : public ::testing::Test {
 protected:
  void SetUp() override {
    conns_ = connectAll(group_, makeSocketTransport, /*lanes=*/1);
    expectConnected(conns_, 2, 1);
    auto errors = exchangeAll(group_, conns_, {4096}, 30);
    for (int r = 0; r < 2; ++r) ASSERT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
  }
  // Rank `rank`'s connection to the other.
  Connection& side(int rank) {
    return *conns_[static_cast<size_t>(rank)].byPeer[static_cast<size_t>(1 - rank)];
  }

 private:
  ScopedEnv env_{{"LANES_SOCKET_IFNAME", "lo"},
                 {"LANES_SOCKET_MOVER", "engine"},
                 {"LANES_SOCKET_NTHREADS", "2"}};
  FakeBootstrapGroup group_{2, false};
  std::vector<RankConnections> conns_;
};

// While the engine keeps making port calls its workers leave the sockets
// to it and look again at doubling intervals, not every millisecond: on a
// host short of cores each of those wake-ups is a thread switch.
TEST_F(SocketEngineMovedPair, EngineCallsKeepItsWorkersAsleep) {
  Connection& c = side(0);
  const SocketMoveCounts before = socketMoveCounts(c);
  // The calls come back to back (no yield): on a loaded machine the gaps
  // between them are this thread's preemptions, counted from 0.5 ms.
  constexpr auto kCalling = std::chrono::milliseconds(400);
  constexpr auto kGap = std::chrono::microseconds(500);
  int gaps = 0;
  auto last = std::chrono::steady_clock::now();
  const auto end = last + kCalling;
  for (auto now = last; now < end; now = std::chrono::steady_clock::now()) {
    if (now - last >= kGap) ++gaps;
    last = now;
    std::span<const std::byte> view;
    ASSERT_TRUE(c.recvPort(0).peek(&view).isOk());
    EXPECT_TRUE(view.empty());
  }
  const SocketMoveCounts after = socketMoveCounts(c);
  const uint64_t wakeups = after.engineWatchWakeups - before.engineWatchWakeups;
  const uint64_t restarts = after.engineWatchRestarts - before.engineWatchRestarts;
  constexpr uint64_t kWorkers = 2;
  // A worker restarts only once the engine made no call for 1 ms: two
  // consecutive intervals spanning such a pause hold one of 0.5 ms, so each
  // counted gap allows two pauses, and the times before the first call and
  // after the last one a pause each.
  EXPECT_LE(restarts, kWorkers * (2 * static_cast<uint64_t>(gaps) + 2)) << gaps << " gaps";
  // From a start, a worker looks after 1, 2, ..., 32 ms (6 wake-ups), then
  // every 64 ms (at most 7 in 400 ms); a restart adds 6 more and cuts one
  // 64 ms look short. A look every millisecond would give up to 800 with
  // no restart at all (659 in a run of the earlier code).
  const uint64_t bound = kWorkers * (6 + 7) + 7 * restarts;
  EXPECT_GT(wakeups, 0u);  // the workers did look
  EXPECT_LE(wakeups, bound) << restarts << " restarts";
}

// Once the engine stops calling, the workers read the sockets again: the
// bytes that arrive meanwhile reach the ring without any call (here within
// 10 s; the design says after the workers' longest look, 64 ms).
TEST_F(SocketEngineMovedPair, WorkersReadAgainOnceTheEngineStopsCalling) {
  Connection& receiver = side(0);
  Connection& sender = side(1);
  // Calls long enough for the workers to reach their longest look.
  const auto calling = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < calling) {
    std::span<const std::byte> view;
    ASSERT_TRUE(receiver.recvPort(0).peek(&view).isOk());
  }
  const uint64_t readBefore = socketMoveCounts(receiver).workerReadBytes;
  constexpr size_t kBytes = 64 * 1024;
  std::vector<std::byte> out(kBytes);
  for (size_t i = 0; i < kBytes; ++i) out[i] = std::byte{static_cast<uint8_t>(i * 7 + 3)};
  const Deadline posting = Deadline::after(10);
  for (size_t done = 0; done < kBytes;) {
    size_t taken = 0;
    ASSERT_TRUE(sender.sendPort(0).post(out.data() + done, kBytes - done, &taken).isOk());
    done += taken;
    ASSERT_FALSE(posting.expired()) << done << " of " << kBytes << " bytes posted within 10 s";
  }
  // No call on the receiving side until its workers have read every byte.
  const Deadline deadline = Deadline::after(10);
  auto workerRead = [&] { return socketMoveCounts(receiver).workerReadBytes - readBefore; };
  while (workerRead() < kBytes && !deadline.expired())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(workerRead(), kBytes) << "10 s without a call: the workers read only these bytes";
  std::span<const std::byte> view;
  ASSERT_TRUE(receiver.recvPort(0).peek(&view).isOk());
  ASSERT_EQ(view.size(), kBytes) << "the workers' bytes are in the ring";
  for (size_t i = 0; i < kBytes; ++i) ASSERT_EQ(view[i], out[i]) << "byte " << i;
  receiver.recvPort(0).consume(kBytes);
}

// Every message is one stripe per socket, so all the workers receive their
// last frame of it at about the same moment, and nothing more arrives until
// the message is answered: whichever worker finishes last must publish the
// whole message (each reading the others' cursors as they were before their
// last frames left it stuck for good). Bytes are checked too.
TEST(SocketTransport, PingPongEndingOnEverySocketAtOnceNeverStalls) {
  ScopedEnv env({{"LANES_SOCKET_IFNAME", "lo"},
                 {"LANES_SOCKET_MOVER", "workers"},
                 {"LANES_SOCKET_NTHREADS", "4"},
                 {"LANES_NSOCKS_PERTHREAD", "1"},
                 {"LANES_SOCKET_RING_BYTES", "64K"},
                 {"LANES_SOCKET_STRIPE_BYTES", "4K"}});
  FakeBootstrapGroup group(2, false);
  auto conns = connectAll(group, makeSocketTransport, /*lanes=*/1);
  expectConnected(conns, 2, 1);
  constexpr size_t kMessage = 4 * 4096;
  // ThreadSanitizer runs each round about ten times slower and looks for data
  // races, which a few rounds show as well as many.
  constexpr int kRounds = kUnderThreadSanitizer ? 2000 : 8000;
  std::vector<std::string> errors(2);
  runRanks(2, [&](int rank) {
    Connection& c = *conns[static_cast<size_t>(rank)].byPeer[static_cast<size_t>(1 - rank)];
    std::vector<std::byte> out(kMessage);
    uint64_t sentAt = 0, receivedAt = 0;
    auto send = [&] {
      for (size_t i = 0; i < kMessage; ++i)
        out[i] = std::byte{patternByte(rank, 1 - rank, 0, sentAt + i)};
      for (size_t done = 0; done < kMessage;) {
        size_t taken = 0;
        Status st = c.sendPort(0).post(out.data() + done, kMessage - done, &taken);
        if (!st.isOk()) return st.message();
        done += taken;
      }
      sentAt += kMessage;
      return std::string();
    };
    auto receive = [&](int round) {
      const Deadline deadline = Deadline::after(10);
      for (size_t got = 0; got < kMessage;) {
        std::span<const std::byte> view;
        Status st = c.recvPort(0).peek(&view);
        if (!st.isOk()) return st.message();
        if (view.empty()) {
          if (deadline.expired())
            return "round " + std::to_string(round) + ": " + std::to_string(got) + " of " +
                   std::to_string(kMessage) + " bytes arrived within 10 s";
          continue;
        }
        const size_t n = std::min(view.size(), kMessage - got);
        for (size_t i = 0; i < n; ++i) {
          if (view[i] != std::byte{patternByte(1 - rank, rank, 0, receivedAt + got + i)})
            return "round " + std::to_string(round) + ": wrong byte at " +
                   std::to_string(receivedAt + got + i);
        }
        c.recvPort(0).consume(n);
        got += n;
      }
      receivedAt += kMessage;
      return std::string();
    };
    std::string& error = errors[static_cast<size_t>(rank)];
    for (int round = 0; round < kRounds && error.empty(); ++round) {
      if (rank == 0) {
        error = send();
        if (error.empty()) error = receive(round);
      } else {
        error = receive(round);
        if (error.empty()) error = send();
      }
    }
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

TEST(SocketTransport, CanConnectAnyRank) {
  auto t = makeSocketTransport();
  RankInfo a, b;
  a.hostHash = 1;
  b.hostHash = 2;
  EXPECT_TRUE(t->canConnect(a, b));
}

TEST(SocketTransport, LargeStreamUsesEverySocket) {
  ScopedEnv env({{"LANES_SOCKET_IFNAME", "lo"},
                 {"LANES_SOCKET_NTHREADS", "2"},
                 {"LANES_NSOCKS_PERTHREAD", "2"}});
  FakeBootstrapGroup group(2, false);
  auto conns = connectAll(group, makeSocketTransport, /*lanes=*/1);
  expectConnected(conns, 2, 1);
  auto errors = exchangeAll(group, conns, {64u << 20}, 120);
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  for (int r = 0; r < 2; ++r) {
    auto perSocket = socketPayloadBytesSent(*conns[r].owned[0]);
    ASSERT_EQ(perSocket.size(), 4u);
    uint64_t total = 0;
    for (size_t i = 0; i < perSocket.size(); ++i) {
      EXPECT_GT(perSocket[i], 0u) << "rank " << r << " socket " << i << " carried nothing";
      total += perSocket[i];
    }
    EXPECT_EQ(total, 64u << 20);
  }
}

// Large frames go with MSG_ZEROCOPY on every socket of a striped stream, and
// the bytes arrive whole (the ring's reuse is tested against a closed window
// in test_socket_zero_copy.cc). Loopback's reports all say "copied", which
// turns zero-copy off on every socket after a run of them.
// Zero-copy sends are the workers' (the engine sends from the caller's
// bytes, which must be free again when the post returns).
TEST(SocketTransport, ZeroCopySendsDeliverEveryByteAndStopWhereTheKernelCopies) {
  ScopedEnv env({{"LANES_SOCKET_IFNAME", "lo"},
                 {"LANES_SOCKET_MOVER", "workers"},
                 {"LANES_SOCKET_NTHREADS", "2"},
                 {"LANES_NSOCKS_PERTHREAD", "2"},
                 {"LANES_SOCKET_RING_BYTES", "256K"},
                 {"LANES_SOCKET_STRIPE_BYTES", "16K"},
                 {"LANES_SOCKET_ZEROCOPY_BYTES", "4K"}});
  FakeBootstrapGroup group(2, false);
  auto conns = connectAll(group, makeSocketTransport, /*lanes=*/2);
  expectConnected(conns, 2, 2);
  auto errors = exchangeAll(group, conns, {32u << 20, 100000, 17}, 120);
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  for (int r = 0; r < 2; ++r) {
    const std::vector<ZeroCopyCounts> counts = socketZeroCopyCounts(*conns[r].owned[0]);
    ASSERT_EQ(counts.size(), 4u);
    for (size_t i = 0; i < counts.size(); ++i) {
      EXPECT_GT(counts[i].sends, 0u) << "rank " << r << " socket " << i;
      EXPECT_GE(counts[i].copiedReports, uint64_t{ZeroCopySends::kCopiedReportsBeforeOff})
          << "rank " << r << " socket " << i;
      EXPECT_TRUE(counts[i].turnedOff) << "rank " << r << " socket " << i;
    }
  }
}

// LANES_SOCKET_BUSY_POLL: workers spin between messages instead of sleeping;
// every byte still arrives in order on every lane, through credits too.
TEST(SocketTransport, BusyPollingWorkersDeliverEveryByte) {
  ScopedEnv env({{"LANES_SOCKET_IFNAME", "lo"},
                 {"LANES_SOCKET_BUSY_POLL", "200"},
                 {"LANES_SOCKET_RING_BYTES", "64K"},
                 {"LANES_SOCKET_STRIPE_BYTES", "4K"}});
  FakeBootstrapGroup group(3, false);
  auto conns = connectAll(group, makeSocketTransport, /*lanes=*/2);
  expectConnected(conns, 3, 2);
  auto errors = exchangeAll(group, conns, kSizes, 90);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// LANES_SOCKET_ZEROCOPY_BYTES=0: plain sends only.
TEST(SocketTransport, ZeroCopyOffSendsPlainly) {
  ScopedEnv env({{"LANES_SOCKET_IFNAME", "lo"}, {"LANES_SOCKET_ZEROCOPY_BYTES", "0"}});
  FakeBootstrapGroup group(2, false);
  auto conns = connectAll(group, makeSocketTransport, /*lanes=*/1);
  expectConnected(conns, 2, 1);
  auto errors = exchangeAll(group, conns, {8u << 20}, 60);
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  for (int r = 0; r < 2; ++r) {
    for (const ZeroCopyCounts& c : socketZeroCopyCounts(*conns[r].owned[0])) {
      EXPECT_EQ(c.sends, 0u);
      EXPECT_FALSE(c.turnedOff);
    }
  }
}

// Bytes posted to peers that never read cannot leave: a destroy drains
// them until one deadline for all the connections (Connection::drain, as a
// communicator's destroy does), and destruction does not wait again per peer.
// The workers mover: it takes posts into the ring, where they wait. The
// engine mover sends from the caller and takes nothing past the peer's
// credit, so its ring may hold nothing to drain.
TEST(SocketTransport, DrainingPeersThatNeverReadWaitsOnceForAll) {
  ScopedEnv env({{"LANES_SOCKET_IFNAME", "lo"},
                 {"LANES_SOCKET_MOVER", "workers"},
                 {"LANES_SOCKET_RING_BYTES", "64K"}});
  constexpr int kRanks = 4;
  FakeBootstrapGroup group(kRanks, false);
  auto conns = connectAll(group, makeSocketTransport, /*lanes=*/1);
  expectConnected(conns, kRanks, 1);
  std::vector<std::byte> block(64 << 10, std::byte{7});
  for (Connection* c : conns[0].byPeer) {
    if (c == nullptr) continue;
    // Past the peer's credit and the kernel's socket buffers: the ring fills
    // and stays full. A slow mover (ThreadSanitizer) leaves the ring full for
    // a moment while the kernel still takes bytes, so only 20 refusals in a
    // row (100 ms without progress) count as full.
    for (int idle = 0; idle < 20;) {
      size_t taken = 0;
      ASSERT_TRUE(c->sendPort(0).post(block.data(), block.size(), &taken).isOk());
      if (taken == 0) {
        ++idle;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      } else {
        idle = 0;
      }
    }
  }
  const auto start = std::chrono::steady_clock::now();
  const Deadline deadline = Deadline::after(1);
  for (auto& c : conns[0].owned) c->drain(deadline);
  conns[0].byPeer.clear();
  conns[0].owned.clear();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(seconds, 0.9) << "the drain gave up before its deadline";
  EXPECT_LT(seconds, 1 + kConnectionDrainSeconds) << "destruction waited again per peer";
}

TEST(SocketTransport, SocketsOpenOnlyBetweenPeersThatTalk) {
  ScopedEnv env({{"LANES_SOCKET_IFNAME", "lo"},
                 {"LANES_SOCKET_NTHREADS", "2"},
                 {"LANES_NSOCKS_PERTHREAD", "1"}});
  const int sockets = countFds("socket:");
  const int events = countFds("anon_inode:[eventfd]");
  constexpr int kRanks = 6;
  FakeBootstrapGroup group(kRanks, false);
  auto conns = connectAll(group, makeSocketTransport, 2);
  expectConnected(conns, kRanks, 2);
  // Six ranks reach each other through one listener and its thread's eventfd.
  EXPECT_EQ(countFds("socket:") - sockets, 1);
  EXPECT_EQ(countFds("anon_inode:[eventfd]") - events, 1);

  // Only ranks 0 and 1 talk: two sockets, both ends in this process, and a
  // worker with its eventfd per socket on each side.
  std::vector<std::string> errors(2);
  runRanks(2, [&](int rank) {
    std::vector<Connection*> byPeer(kRanks, nullptr);
    byPeer[static_cast<size_t>(1 - rank)] = conns[static_cast<size_t>(rank)].byPeer[1 - rank];
    errors[static_cast<size_t>(rank)] =
        driveStreams(rank, byPeer, {1000, 65537}, Deadline::after(60));
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(settledSockets(sockets, 1 + 2 * 2), 1 + 2 * 2);
  EXPECT_EQ(countFds("anon_inode:[eventfd]") - events, 1 + 2 * 2);
  for (int r = 0; r < kRanks; ++r) {
    for (const auto& c : conns[static_cast<size_t>(r)].owned) {
      const bool talked = (r == 0 && c->peer() == 1) || (r == 1 && c->peer() == 0);
      EXPECT_EQ(socketPayloadBytesSent(*c).empty(), !talked)
          << "rank " << r << " to rank " << c->peer();
    }
  }
}

TEST(SocketTransport, PairThatDialsAtOnceKeepsOneSetOfSockets) {
  test::LogFile log;
  ScopedEnv env({{"LANES_SOCKET_IFNAME", "lo"},
                 {"LANES_SOCKET_NTHREADS", "2"},
                 {"LANES_NSOCKS_PERTHREAD", "2"},
                 {"LANES_DEBUG", "INFO"}});
  logReloadConfig();
  const int sockets = countFds("socket:");
  // Rounds until both ranks dialled at once at least once (about one in
  // three here), and at least 20.
  size_t raced = 0;
  int round = 0;
  for (; round < 200 && (round < 20 || raced == 0); ++round) {
    FakeBootstrapGroup group(2, false);
    auto conns = connectAll(group, makeSocketTransport, 2);
    expectConnected(conns, 2, 2);
    // Both ranks use the connection at the same moment, so that both dial.
    std::atomic<int> ready{0};
    auto errors = std::vector<std::string>(2);
    runRanks(2, [&](int rank) {
      ready.fetch_add(1);
      while (ready.load() < 2) {
      }
      errors[static_cast<size_t>(rank)] = driveStreams(
          rank, conns[static_cast<size_t>(rank)].byPeer, {100, 200000}, Deadline::after(60));
    });
    ASSERT_EQ(errors[0], "") << "round " << round;
    ASSERT_EQ(errors[1], "") << "round " << round;
    // The listener and one dial's four sockets, both ends: the other dial,
    // if there was one, is closed.
    ASSERT_EQ(settledSockets(sockets, 1 + 2 * 4), 1 + 2 * 4) << "round " << round;
    raced = log.count("dialled at the same time");
  }
  EXPECT_GT(raced, 0u) << "in " << round << " rounds the ranks never dialled at once";
}

TEST(SocketTransport, CloseWhileConnectingStopsAtOnce) {
  SocketConnectionConfig cfg;
  cfg.rank = 0;
  cfg.peer = 1;
  cfg.peerAddress = "192.0.2.1:9";
  std::atomic<bool> establishing{false};
  auto establish = [&](const std::atomic<bool>& abandoned, std::vector<Socket>*) {
    establishing = true;
    Deadline limit = Deadline::after(30);
    while (!abandoned.load() && !limit.expired())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return remoteError("gave up connecting to peer rank 1");
  };
  std::unique_ptr<Connection> conn;
  ASSERT_TRUE(makeSocketConnection(cfg, establish, &conn).isOk());
  uint8_t data[64] = {};
  size_t taken = 0;
  ASSERT_TRUE(conn->sendPort(0).post(data, sizeof(data), &taken).isOk());  // starts it
  Deadline started = Deadline::after(10);
  while (!establishing && !started.expired()) std::this_thread::yield();
  ASSERT_TRUE(establishing.load());
  auto t0 = std::chrono::steady_clock::now();
  conn->close();
  Status st = conn->sendPort(0).post(data, sizeof(data), &taken);
  EXPECT_EQ(st.code(), lanesRemoteError);
  EXPECT_NE(st.message().find("peer rank 1"), std::string::npos) << st.message();
  conn.reset();  // joins the worker still connecting
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
}

TEST(SocketTransport, PeerThatNeverAnswersTheHelloTimesOutNamingIt) {
  ScopedEnv env({{"LANES_SOCKET_IFNAME", "lo"}});
  // A listener whose process never answers: the kernel completes the
  // handshake from its backlog and nobody reads the hello.
  SocketAddress silent;
  ASSERT_TRUE(SocketAddress::parse("127.0.0.1:0", &silent).isOk());
  Socket listener;
  ASSERT_TRUE(Socket::listen(&silent, 16, &listener).isOk());
  std::shared_ptr<SocketHub> hub;
  ASSERT_TRUE(SocketHub::acquire("lo", AF_INET, 0, &hub).isOk());
  UniqueIdData id{};
  id.commId = 0x5eed;
  std::shared_ptr<SocketSide> side;
  ASSERT_TRUE(SocketSide::create(id, 0, SocketSettings{2, 1, 1u << 20, 128u << 10},
                                 {hub->address(), silent}, hub, &side)
                  .isOk());
  std::atomic<bool> abandoned{false};
  std::vector<Socket> sockets;
  Status st = side->establish(1, abandoned, Deadline::after(0.5), &sockets);
  EXPECT_EQ(st.code(), lanesTimeout) << st.message();
  EXPECT_NE(st.message().find("peer rank 1 (" + silent.toString() + ")"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("no answer to its hello"), std::string::npos) << st.message();
}

// The engine moving the bytes, and the workers.
class SocketMovers : public ::testing::TestWithParam<const char*> {};

INSTANTIATE_TEST_SUITE_P(Movers, SocketMovers, ::testing::Values("engine", "workers"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

// A post returns once its bytes are the transport's. The rest of a frame
// the kernel took only in part must still leave while the sender makes no
// further call: the receiver reads slowly and the credit window (the ring)
// is larger than the kernel's buffers, so they are full when posts go.
TEST_P(SocketMovers, PostedBytesLeaveWhileTheSenderMakesNoCall) {
  ScopedEnv env({{"LANES_SOCKET_IFNAME", "lo"},
                 {"LANES_SOCKET_MOVER", GetParam()},
                 {"LANES_SOCKET_RING_BYTES", "64M"}});
  FakeBootstrapGroup group(2, false);
  auto conns = connectAll(group, makeSocketTransport, 1);
  expectConnected(conns, 2, 1);
  constexpr size_t kBytes = 24u << 20;
  std::vector<uint8_t> out(kBytes);
  for (size_t i = 0; i < kBytes; ++i) out[i] = static_cast<uint8_t>(i * 7 + 3);
  // Until its sockets are up a connection takes posts into its ring: open
  // them first.
  auto opened = exchangeAll(group, conns, {16}, 30);
  ASSERT_EQ(opened[0], "");
  ASSERT_EQ(opened[1], "");
  std::vector<std::string> errors(2);
  runRanks(2, [&](int rank) {
    const Deadline deadline = Deadline::after(60);
    Connection& c = *conns[static_cast<size_t>(rank)].byPeer[static_cast<size_t>(1 - rank)];
    std::string& error = errors[static_cast<size_t>(rank)];
    if (rank == 0) {
      for (size_t done = 0; done < kBytes && error.empty();) {
        size_t taken = 0;
        Status st = c.sendPort(0).post(out.data() + done, kBytes - done, &taken);
        if (!st.isOk()) error = st.message();
        if (deadline.expired()) error = "posting timed out";
        done += taken;
      }
      return;  // no call on this connection from here on
    }
    for (size_t got = 0; got < kBytes && error.empty();) {
      std::span<const std::byte> view;
      Status st = c.recvPort(0).peek(&view);
      if (!st.isOk()) error = st.message();
      view = view.first(std::min<size_t>(view.size(), 256u << 10));
      for (size_t i = 0; i < view.size() && error.empty(); ++i) {
        if (static_cast<uint8_t>(view[i]) != static_cast<uint8_t>((got + i) * 7 + 3))
          error = "wrong byte at " + std::to_string(got + i);
      }
      c.recvPort(0).consume(view.size());
      got += view.size();
      if (deadline.expired())
        error = std::to_string(got) + " of " + std::to_string(kBytes) + " bytes arrived";
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

TEST_P(SocketMovers, PeerCloseFailsPostAndPeekNamingThePeer) {
  ScopedEnv env({{"LANES_SOCKET_IFNAME", "lo"}, {"LANES_SOCKET_MOVER", GetParam()}});
  FakeBootstrapGroup group(2, false);
  auto conns = connectAll(group, makeSocketTransport, 2);
  expectConnected(conns, 2, 2);
  Connection* c0 = conns[0].byPeer[1];
  Connection* c1 = conns[1].byPeer[0];

  // Bytes sent before the close arrive first.
  uint8_t data[64] = {42};
  size_t taken = 0;
  ASSERT_TRUE(c1->sendPort(0).post(data, sizeof(data), &taken).isOk());
  ASSERT_EQ(taken, sizeof(data));
  Deadline deadline = Deadline::after(30);
  std::span<const std::byte> view;
  while (view.empty() && !deadline.expired()) ASSERT_TRUE(c0->recvPort(0).peek(&view).isOk());
  ASSERT_EQ(view.size(), sizeof(data));
  EXPECT_EQ(static_cast<uint8_t>(view[0]), 42);
  c0->recvPort(0).consume(view.size());

  c1->close();
  // The local side fails at once.
  EXPECT_EQ(c1->sendPort(0).post(data, sizeof(data), &taken).code(), lanesRemoteError);

  // The peer learns through EOF; no hang: bounded by the deadline.
  Status st;
  while (st.isOk() && !deadline.expired()) {
    st = c0->recvPort(1).peek(&view);
    if (st.isOk()) st = c0->sendPort(1).post(data, sizeof(data), &taken);
    Backoff().pause();
  }
  ASSERT_FALSE(st.isOk()) << "rank 0 never noticed that rank 1 closed";
  EXPECT_EQ(st.code(), lanesRemoteError);
  EXPECT_NE(st.message().find("peer rank 1"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("127.0.0.1"), std::string::npos) << st.message();
  // Every port of the connection fails, not only the one that saw it.
  EXPECT_EQ(c0->recvPort(0).peek(&view).code(), lanesRemoteError);
  EXPECT_EQ(c0->sendPort(0).post(data, sizeof(data), &taken).code(), lanesRemoteError);
}

TEST(SocketTransport, RanksWithDifferentSettingsFailTogether) {
  // Rank 0 and 1 of one group cannot see different environments as threads,
  // so use different lane counts, which the hello checks the same way.
  ScopedEnv env({{"LANES_SOCKET_IFNAME", "lo"}});
  FakeBootstrapGroup group(2, false);
  std::vector<Status> status(2);
  runRanks(2, [&](int rank) {
    FakeBootstrap bootstrap(&group, rank);
    TransportContext ctx;
    ctx.bootstrap = &bootstrap;
    ctx.rank = rank;
    ctx.nranks = 2;
    ctx.ranks = &group.ranks();
    ctx.commTag = group.commTag();
    ctx.config = CommConfig::fromEnv().transport;
    ctx.lanes = rank == 0 ? 2 : 3;
    ctx.timeoutSeconds = 30;
    std::vector<std::unique_ptr<Connection>> out;
    status[rank] = makeSocketTransport()->connect(ctx, {1 - rank}, &out);
  });
  // Both see every rank's settings at init, so both fail naming the other.
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(status[r].code(), lanesInvalidUsage) << status[r].message();
    EXPECT_NE(status[r].message().find("disagree"), std::string::npos) << status[r].message();
    EXPECT_NE(status[r].message().find("rank " + std::to_string(1 - r)), std::string::npos)
        << status[r].message();
  }
}

TEST(SocketTransport, DataSocketWithAForeignSecretIsRefused) {
  ScopedEnv env({{"LANES_SOCKET_IFNAME", "lo"}});
  FakeBootstrapGroup group(2, false);
  std::vector<Status> status(2);
  runRanks(2, [&](int rank) {
    FakeBootstrap bootstrap(&group, rank);
    if (rank == 0) {
      UniqueIdData foreign = group.id();
      foreign.secret[5] ^= 1;
      bootstrap.overrideId(foreign);
    }
    TransportContext ctx;
    ctx.bootstrap = &bootstrap;
    ctx.rank = rank;
    ctx.nranks = 2;
    ctx.ranks = &group.ranks();
    ctx.commTag = group.commTag();
    ctx.config = CommConfig::fromEnv().transport;
    ctx.timeoutSeconds = 30;
    std::vector<std::unique_ptr<Connection>> out;
    // Sockets open at the first use, so the secrets meet there.
    status[rank] = makeSocketTransport()->connect(ctx, {1 - rank}, &out);
    if (!status[rank].isOk()) return;
    uint8_t data[64] = {};
    size_t taken = 0;
    std::span<const std::byte> view;
    Deadline deadline = Deadline::after(20);
    Status st;
    while (st.isOk() && !deadline.expired()) {
      st = out[0]->sendPort(0).post(data, sizeof(data), &taken);
      if (st.isOk()) st = out[0]->recvPort(0).peek(&view);
      if (st.isOk() && !view.empty()) st = internalError("received data with a foreign secret");
      Backoff().pause();
    }
    status[rank] = st;
  });
  // Each refused the other's dial at the hello: no timeout, no data.
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(status[r].code(), lanesRemoteError) << "rank " << r << ": " << status[r].message();
    EXPECT_NE(status[r].message().find("no answer to its hello"), std::string::npos)
        << status[r].message();
  }
}

}  // namespace
}  // namespace lanes::testing
