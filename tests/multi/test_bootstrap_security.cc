// Strangers on the network: connections that send garbage, a wrong magic or
// version, an oversized length, the wrong secret, or nothing at all, aimed at
// the bootstrap root, at a rank's control listener and at the TCP transport's
// data listener while real ranks join. Each must be dropped and logged, and
// the real ranks must still form the communicator and move data.
#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <latch>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/socket.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/control_mesh.h"
#include "bootstrap/mesh_channel.h"
#include "bootstrap/rendezvous.h"
#include "bootstrap/wire.h"
#include "tests/multi/harness.h"
#include "tests/unit/fake_bootstrap.h"
#include "tests/unit/transport_streams.h"
#include "transport/transport.h"

namespace lanes::test {
namespace {

// Sends warnings to a file for one test and restores the log config after.
class LogCapture {
 public:
  LogCapture() {
    char dir[] = "/tmp/lanes-sec-XXXXXX";
    if (::mkdtemp(dir)) path_ = std::string(dir) + "/warn.log";
    save("LANES_DEBUG");
    save("LANES_DEBUG_FILE");
    ::setenv("LANES_DEBUG", "WARN", 1);
    ::setenv("LANES_DEBUG_FILE", path_.c_str(), 1);
    logReloadConfig();
  }
  ~LogCapture() {
    for (auto& [name, value] : saved_) {
      if (value)
        ::setenv(name.c_str(), value->c_str(), 1);
      else
        ::unsetenv(name.c_str());
    }
    logReloadConfig();
    ::unlink(path_.c_str());
    ::rmdir(path_.substr(0, path_.rfind('/')).c_str());
  }
  std::string text() const {
    std::ifstream in(path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  int count(const std::string& needle) const {
    const std::string t = text();
    int n = 0;
    for (size_t at = t.find(needle); at != std::string::npos; at = t.find(needle, at + 1)) ++n;
    return n;
  }

 private:
  void save(const char* name) {
    const char* v = std::getenv(name);
    saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
  }
  std::string path_;
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

std::vector<uint8_t> frame(uint32_t magic, uint16_t version, uint16_t type, uint64_t length,
                           const std::vector<uint8_t>& payload = {}) {
  FrameHeader h{magic, version, type, 0, 0, length};
  std::vector<uint8_t> out(sizeof(h) + payload.size());
  std::memcpy(out.data(), &h, sizeof(h));
  if (!payload.empty()) std::memcpy(out.data() + sizeof(h), payload.data(), payload.size());
  return out;
}

std::vector<uint8_t> helloFrame(const uint8_t secret[32], uint64_t commId, int nranks, int rank,
                                bool toRoot) {
  wire::Hello h;
  std::memcpy(h.secret, secret, sizeof(h.secret));
  h.commId = commId;
  h.nranks = nranks;
  h.rank = rank;
  h.info.rank = rank;
  h.listen = SocketAddress{};
  (void)SocketAddress::parse("127.0.0.1:9", &h.listen);
  auto payload = wire::encodeHello(h, toRoot);
  return frame(kFrameMagic, kFrameVersion, wire::kHello, payload.size(), payload);
}

// One stranger: connects, sends its bytes, and can tell whether the other end
// closed the connection.
struct Stranger {
  std::string kind;
  Socket sock;

  static Stranger open(const std::string& kind, const SocketAddress& to,
                       const std::vector<uint8_t>& bytes) {
    Stranger s{kind, {}};
    Status st = Socket::connect(to, Deadline::after(10), &s.sock);
    EXPECT_TRUE(st.isOk()) << kind << ": " << st.message();
    if (st.isOk() && !bytes.empty()) {
      st = s.sock.sendAll(bytes.data(), bytes.size(), Deadline::after(10));
      EXPECT_TRUE(st.isOk()) << kind << ": " << st.message();
    }
    return s;
  }
  // True once the peer closed or reset the connection, within `seconds`.
  bool closedWithin(double seconds) const {
    Deadline d = Deadline::after(seconds);
    do {
      pollfd p{sock.fd(), POLLIN, 0};
      if (::poll(&p, 1, d.remainingMs()) <= 0) continue;
      uint8_t buf[256];
      ssize_t n = ::recv(sock.fd(), buf, sizeof(buf), MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
    } while (!d.expired());
    return false;
  }
};

// Every kind of stranger that talks the frame protocol wrong. `claimRank` is
// the rank the wrong-secret hello pretends to be (a real rank's slot).
std::vector<Stranger> openStrangers(const SocketAddress& to, const UniqueIdData& id, int nranks,
                                    int claimRank, bool toRoot) {
  std::vector<uint8_t> garbage(64);
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<uint8_t>(i * 131 + 7);
  uint8_t wrongSecret[32];
  std::memcpy(wrongSecret, id.secret, 32);
  wrongSecret[31] ^= 1;  // differs only in the last byte
  std::vector<Stranger> out;
  out.push_back(Stranger::open("garbage", to, garbage));
  out.push_back(Stranger::open("wrong magic", to, frame(0xdeadbeef, kFrameVersion, 1, 8)));
  out.push_back(Stranger::open("wrong version", to, frame(kFrameMagic, 99, 1, 8)));
  out.push_back(
      Stranger::open("oversized length", to, frame(kFrameMagic, kFrameVersion, 1, 1ull << 40)));
  out.push_back(Stranger::open("wrong secret", to,
                               helloFrame(wrongSecret, id.commId, nranks, claimRank, toRoot)));
  out.push_back(
      Stranger::open("not a hello", to, frame(kFrameMagic, kFrameVersion, 4, 3, {1, 2, 3})));
  return out;
}

float expectedSum(int nranks, size_t i) {
  return static_cast<float>(nranks * (nranks - 1) / 2) + static_cast<float>(nranks * (i % 7));
}

void allReduceBody(int rank, int nranks, const lanesUniqueId& id) {
  CommGuard comm(initComm(rank, nranks, id));
  std::vector<float> in(1000), out(1000);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(rank + static_cast<int>(i % 7));
  RANK_CHECK_LANES(
      lanesAllReduce(in.data(), out.data(), in.size(), lanesFloat32, lanesSum, comm.get(), nullptr),
      comm.get());
  for (size_t i = 0; i < out.size(); ++i)
    RANK_CHECK(out[i] == expectedSum(nranks, i), "element %zu is %g, expected %g", i,
               static_cast<double>(out[i]), static_cast<double>(expectedSum(nranks, i)));
}

void expectAllExitedZero(const std::vector<RankOutcome>& outcomes) {
  for (const auto& o : outcomes)
    EXPECT_TRUE(o.finished && o.exited && o.exitCode == 0) << o.describe();
}

// The ranks are forked before the id exists (and so before the root's thread
// starts logging the strangers' drops); they join once the strangers are in.
TEST(BootstrapSecurity, RootDropsStrangersWhileRanksJoin) {
  constexpr int kRanks = 3;
  LogCapture log;
  std::vector<Stranger> strangers;
  std::optional<Stranger> silent;
  RunOptions options;
  options.beforeRanksStart = [&](const lanesUniqueId& id) {
    UniqueIdData data;
    ASSERT_TRUE(decodeUniqueId(id, &data).isOk());
    const SocketAddress root = wire::rootAddress(data);
    // One of them claims rank 0 with a wrong secret.
    strangers = openStrangers(root, data, kRanks, /*claimRank=*/0, /*toRoot=*/true);
    silent = Stranger::open("silent", root, {});
  };
  ForkedRanks ranks;
  ranks.start(kRanks, allReduceBody, options);
  expectAllExitedZero(ranks.wait());

  ASSERT_EQ(strangers.size(), 6u);
  for (const auto& s : strangers) EXPECT_TRUE(s.closedWithin(10)) << s.kind << " was not dropped";
  // The root closes the silent one at its hello deadline or when it exits.
  ASSERT_TRUE(silent.has_value());
  EXPECT_TRUE(silent->closedWithin(wire::kHelloTimeoutSeconds + 10));
  const std::string text = log.text();
  // (The silent one is logged too if the ranks took longer than its deadline.)
  EXPECT_GE(log.count("dropped connection from"), static_cast<int>(strangers.size())) << text;
  for (const char* why : {"bad magic", "protocol version 99", "announcing 1099511627776 bytes",
                          "wrong secret", "not a hello"})
    EXPECT_NE(text.find(why), std::string::npos) << "no drop logged for: " << why << "\n" << text;
}

TEST(BootstrapSecurity, RootDropsSilentConnectionAndServesRanksAfter) {
  LogCapture log;
  RunOptions options;
  options.beforeRanksStart = [&](const lanesUniqueId& id) {
    UniqueIdData data;
    ASSERT_TRUE(decodeUniqueId(id, &data).isOk());
    Stranger silent = Stranger::open("silent", wire::rootAddress(data), {});
    EXPECT_TRUE(silent.closedWithin(wire::kHelloTimeoutSeconds + 10));
    EXPECT_EQ(log.count("sent no hello within"), 1) << log.text();
  };
  ForkedRanks ranks;
  ranks.start(2, allReduceBody, options);
  expectAllExitedZero(ranks.wait());
}

// Ranks in threads, driven through joinRoot and a ControlMesh so the test
// knows every rank's control listener and can attack it before the ranks
// first talk (which is when their connections open).
TEST(BootstrapSecurity, ControlListenerDropsStrangers) {
  constexpr int kRanks = 3;
  LogCapture log;
  lanesUniqueId uid;
  ASSERT_TRUE(createUniqueIdAndRoot("127.0.0.1:0", nullptr, &uid).isOk());
  UniqueIdData id;
  ASSERT_TRUE(decodeUniqueId(uid, &id).isOk());

  struct Rank {
    RankInfo self;
    Socket listener;
    std::vector<RankInfo> infos;
    std::vector<SocketAddress> listens;
    std::shared_ptr<ControlMesh> mesh;
    std::unique_ptr<Bootstrap> bootstrap;
    Status joined, opened, talked;
    std::vector<int> gathered;
  };
  std::vector<Rank> ranks(kRanks);
  std::latch joined(kRanks + 1), attacked(1);
  std::atomic<bool> allJoined{true};
  Watchdog watchdog(120, "ControlListenerDropsStrangers");
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      Rank& me = ranks[static_cast<size_t>(r)];
      me.self.rank = r;
      me.self.pid = ::getpid();
      std::snprintf(me.self.hostname, sizeof(me.self.hostname), "thread%d", r);
      const Deadline deadline = Deadline::after(60);
      me.joined = joinRoot(id, kRanks, me.self, deadline, &me.listener, &me.infos, &me.listens);
      if (me.joined.isOk()) {
        me.mesh =
            std::make_shared<ControlMesh>(id, r, me.infos, me.listens, std::move(me.listener));
        me.joined = me.mesh->start();
      }
      joined.count_down();
      attacked.wait();
      if (!allJoined) return;
      std::vector<int> everyone{0, 1, 2};
      // As Bootstrap::create does: the table first (its connections too
      // open past the strangers), then the root channel.
      me.opened = MeshChannel::gatherTable(me.mesh, me.self, deadline);
      if (me.opened.isOk())
        me.opened =
            MeshChannel::open(me.mesh, kRootChannel, everyone, me.self, deadline, &me.bootstrap);
      if (!me.opened.isOk()) return;
      // Every pair talks, so every pair's connection opens past the strangers.
      me.gathered.assign(kRanks, -1);
      me.gathered[static_cast<size_t>(r)] = 100 + r;
      me.talked = me.bootstrap->allGather(me.gathered.data(), sizeof(int), deadline);
      for (int p = 0; p < kRanks && me.talked.isOk(); ++p) {
        const uint32_t mine = 1000u + static_cast<uint32_t>(r);
        if (p != r) me.talked = me.bootstrap->send(p, 7, &mine, 4);
      }
      for (int p = 0; p < kRanks && me.talked.isOk(); ++p) {
        if (p == r) continue;
        std::vector<uint8_t> got;
        me.talked = me.bootstrap->recv(p, 7, &got, deadline);
        uint32_t v = 0;
        if (me.talked.isOk() && got.size() == 4) std::memcpy(&v, got.data(), 4);
        if (me.talked.isOk() && v != 1000u + static_cast<uint32_t>(p))
          me.talked = internalError("wrong message from rank " + std::to_string(p));
      }
      if (me.talked.isOk()) me.talked = me.bootstrap->barrier(deadline);
    });
  }
  joined.count_down();
  joined.wait();
  for (const Rank& r : ranks) {
    EXPECT_TRUE(r.joined.isOk()) << r.joined.message();
    if (!r.joined.isOk()) allJoined = false;
  }
  // Every rank's listener gets the strangers; the wrong-secret hello claims a
  // real rank. (Rank 0's tree neighbours are the other two: it knows them all.)
  std::vector<Stranger> strangers, silent;
  for (int r = 0; allJoined && r < kRanks; ++r) {
    const SocketAddress& at = ranks[0].listens[static_cast<size_t>(r)];
    for (auto& s : openStrangers(at, id, kRanks, (r + 1) % kRanks, /*toRoot=*/false))
      strangers.push_back(std::move(s));
    silent.push_back(Stranger::open("silent", at, {}));
  }
  const auto attackedAt = Clock::now();
  attacked.count_down();
  for (auto& t : threads) t.join();
  const double talkSeconds = std::chrono::duration<double>(Clock::now() - attackedAt).count();
  if (!allJoined) return;

  for (int r = 0; r < kRanks; ++r) {
    const Rank& me = ranks[static_cast<size_t>(r)];
    EXPECT_TRUE(me.opened.isOk()) << "rank " << r << ": " << me.opened.message();
    EXPECT_TRUE(me.talked.isOk()) << "rank " << r << ": " << me.talked.message();
    EXPECT_EQ(me.gathered, (std::vector<int>{100, 101, 102})) << "rank " << r;
  }
  // Silent strangers sat in the backlog ahead of the real ranks: the ranks
  // must not have waited out their hello deadline (each would cost that long).
  EXPECT_LT(talkSeconds, wire::kHelloTimeoutSeconds) << "the mesh waited for a silent stranger";
  for (auto& s : silent)
    EXPECT_TRUE(s.closedWithin(wire::kHelloTimeoutSeconds + 10)) << "a silent stranger was kept";
  for (auto& s : strangers) EXPECT_TRUE(s.closedWithin(10)) << s.kind << " was not dropped";
  EXPECT_GE(log.count("dropped control connection from"), static_cast<int>(strangers.size()))
      << log.text();
  for (const char* why : {"bad magic", "protocol version 99", "announcing 1099511627776 bytes",
                          "wrong secret", "not a hello"})
    EXPECT_NE(log.text().find(why), std::string::npos) << "no drop logged for: " << why;
  for (Rank& r : ranks) r.bootstrap.reset();
}

// A rank opens its control connections without waiting for the answer, so
// the answering hello is checked when it comes: a process at a rank's
// address that is not that rank (another job took the port) is reported,
// its connection dropped, and the rank's later sends fail naming it.
TEST(BootstrapSecurity, ConnectionToAnImpostorIsDropped) {
  LogCapture log;
  // No root: the mesh is built by hand, as if the ranks had met.
  UniqueIdData id{};
  ASSERT_TRUE(wire::randomBytes(id.secret, sizeof(id.secret)).isOk());
  ASSERT_TRUE(wire::randomBytes(&id.commId, sizeof(id.commId)).isOk());
  id.family = AF_INET;
  uint8_t wrongSecret[32];
  std::memcpy(wrongSecret, id.secret, 32);
  wrongSecret[0] ^= 1;
  // The impostor listens where rank 1 would, and answers any hello with its own.
  SocketAddress impostorAt, mine;
  ASSERT_TRUE(SocketAddress::parse("127.0.0.1:0", &impostorAt).isOk());
  ASSERT_TRUE(SocketAddress::parse("127.0.0.1:0", &mine).isOk());
  Socket impostor;
  ASSERT_TRUE(Socket::listen(&impostorAt, 4, &impostor).isOk());
  std::thread answer([&] {
    Socket s;
    if (!impostor.accept(Deadline::after(30), &s).isOk()) return;
    const auto reply = helloFrame(wrongSecret, id.commId, 2, 1, /*toRoot=*/false);
    (void)s.sendAll(reply.data(), reply.size(), Deadline::after(10));
    uint8_t sink[256];
    size_t n = 0;
    const Deadline until = Deadline::after(10);  // holds the connection open meanwhile
    while (!until.expired() && s.tryRecv(sink, sizeof(sink), &n).isOk())
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  });
  Socket listener;
  ASSERT_TRUE(Socket::listen(&mine, 4, &listener).isOk());
  std::vector<RankInfo> infos(2);
  for (int r = 0; r < 2; ++r) {
    infos[static_cast<size_t>(r)].rank = r;
    std::snprintf(infos[static_cast<size_t>(r)].hostname, sizeof(infos[0].hostname), "node%d", r);
  }
  auto mesh = std::make_shared<ControlMesh>(
      id, 0, infos, std::vector<SocketAddress>{mine, impostorAt}, std::move(listener));
  ASSERT_TRUE(mesh->start().isOk());
  const uint32_t x = 1;
  // Opening the connection and writing the first frame does not wait for the answer.
  EXPECT_TRUE(mesh->send(1, kRootChannel, wire::kData, 1, &x, 4, Deadline::after(10)).isOk());
  Status later;
  for (int i = 0; i < 500; ++i) {
    later = mesh->send(1, kRootChannel, wire::kData, 1, &x, 4, Deadline::after(10));
    if (!later.isOk()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(later.isOk()) << "sends to the impostor kept succeeding";
  EXPECT_FALSE(mesh->connected(1));
  EXPECT_NE(log.text().find("control connection to rank 1 (host node1"), std::string::npos)
      << log.text();
  EXPECT_NE(log.text().find("wrong secret"), std::string::npos) << log.text();
  mesh.reset();
  answer.join();
}

// A FakeBootstrap that tells the test rank 1's TCP listen address (the
// transport's first all-gather: slots that start with the address).
class SpyBootstrap final : public Bootstrap {
 public:
  SpyBootstrap(testing::FakeBootstrapGroup* group, int rank,
               std::function<void(const SocketAddress&)> onAddresses)
      : inner_(group, rank), onAddresses_(std::move(onAddresses)) {}
  int rank() const override { return inner_.rank(); }
  int nranks() const override { return inner_.nranks(); }
  const std::vector<RankInfo>& ranks() const override { return inner_.ranks(); }
  const UniqueIdData& id() const override { return inner_.id(); }
  Status allGather(void* data, size_t bytes, Deadline deadline) override {
    Status st = inner_.allGather(data, bytes, deadline);
    if (st.isOk() && bytes >= sizeof(SocketAddress) && onAddresses_) {
      SocketAddress rank1;
      std::memcpy(&rank1, static_cast<const uint8_t*>(data) + bytes, sizeof(rank1));
      onAddresses_(rank1);
      onAddresses_ = nullptr;
    }
    return st;
  }
  Status barrier(Deadline deadline) override { return inner_.barrier(deadline); }
  Status send(int peer, uint32_t tag, const void* data, size_t bytes) override {
    return inner_.send(peer, tag, data, bytes);
  }
  Status recv(int peer, uint32_t tag, std::vector<uint8_t>* data, Deadline deadline) override {
    return inner_.recv(peer, tag, data, deadline);
  }
  void setFailureHandler(FailureHandler) override {}
  void spreadFailure(int, const std::string&) override {}
  void reportProgress(uint64_t) override {}
  int64_t peerProgress(int) const override { return -1; }
  void shutdown() override {}

 private:
  testing::FakeBootstrap inner_;
  std::function<void(const SocketAddress&)> onAddresses_;
};

// The data transport's hello (transport/socket/socket_transport.cc), as a
// stranger that knows the layout but not the secret would send it.
struct DataHello {
  uint32_t magic = 0x4c4e4454;  // "LNDT"
  uint32_t version = 2;
  uint8_t secret[32] = {};
  uint64_t commId = 0;
  int32_t srcRank = 0, dstRank = 1, socketIndex = 0, reserved = 0, sockets = 2, lanes = 2;
  uint64_t bufferBytes = 0, stripeBytes = 0;
};

template <typename T>
std::vector<uint8_t> bytesOf(const T& v) {
  std::vector<uint8_t> out(sizeof(v));
  std::memcpy(out.data(), &v, sizeof(v));
  return out;
}

TEST(BootstrapSecurity, DataListenerRefusesStrangers) {
  LogCapture log;
  testing::FakeBootstrapGroup group(2, /*sameHost=*/false);
  std::mutex mu;
  std::condition_variable cv;
  std::optional<SocketAddress> target;  // rank 1's data listener
  bool registered = false;
  bool attacked = false;
  std::chrono::steady_clock::time_point attackedTime{};
  std::vector<Stranger> strangers;
  std::thread attacker([&] {
    std::unique_lock lock(mu);
    // Rank 1's communicator is in the hub once its connect returned.
    if (!cv.wait_for(lock, std::chrono::seconds(60),
                     [&] { return target.has_value() && registered; }))
      return;
    DataHello wrongSecret;
    std::memcpy(wrongSecret.secret, group.id().secret, 32);
    wrongSecret.secret[0] ^= 0x80;
    wrongSecret.commId = group.id().commId;
    DataHello wrongMagic = wrongSecret;
    wrongMagic.magic = 0x4c4e4553;
    std::vector<uint8_t> garbage(200, 0x5a);
    // First in the backlog, and never says a word.
    strangers.push_back(Stranger::open("silent", *target, {}));
    strangers.push_back(Stranger::open("garbage", *target, garbage));
    strangers.push_back(Stranger::open("wrong magic", *target, bytesOf(wrongMagic)));
    strangers.push_back(Stranger::open("wrong secret", *target, bytesOf(wrongSecret)));
    attacked = true;
    attackedTime = std::chrono::steady_clock::now();
    cv.notify_all();
  });

  std::vector<testing::RankConnections> conns(2);
  std::chrono::steady_clock::time_point connectedAt{};
  testing::runRanks(2, [&](int rank) {
    SpyBootstrap bootstrap(&group, rank, [&](const SocketAddress& rank1) {
      std::lock_guard lock(mu);
      if (!target) target = rank1;
      cv.notify_all();
    });
    TransportContext ctx;
    ctx.bootstrap = &bootstrap;
    ctx.rank = rank;
    ctx.nranks = 2;
    ctx.ranks = &group.ranks();
    ctx.commTag = group.commTag();
    ctx.lanes = 2;
    ctx.timeoutSeconds = 60;
    auto& mine = conns[static_cast<size_t>(rank)];
    mine.status = makeSocketTransport()->connect(ctx, {1 - rank}, &mine.owned);
    if (rank == 1) {
      std::lock_guard lock(mu);
      registered = true;
      cv.notify_all();
    }
    mine.byPeer.assign(2, nullptr);
    if (!mine.status.isOk()) return;
    for (auto& c : mine.owned) mine.byPeer[static_cast<size_t>(c->peer())] = c.get();
    // The ranks dial each other (at first use) only after the strangers are
    // in the listener's backlog.
    {
      std::unique_lock lock(mu);
      cv.wait_for(lock, std::chrono::seconds(30), [&] { return attacked; });
    }
    const std::string moved =
        testing::driveStreams(rank, mine.byPeer, {1000, 65537}, Deadline::after(60));
    if (rank == 1) connectedAt = std::chrono::steady_clock::now();
    if (!moved.empty()) mine.status = internalError(moved);
  });
  attacker.join();  // attackedTime is settled
  // The silent stranger holds no hello slot: rank 1 had its real peer soon
  // after the attack, not after the 10 s a stranger gets to say hello.
  const double waited = std::chrono::duration<double>(connectedAt - attackedTime).count();
  EXPECT_LT(waited, 5.0) << "rank 1 waited for the silent stranger before taking rank 0";

  for (int r = 0; r < 2; ++r)
    EXPECT_TRUE(conns[r].status.isOk()) << "rank " << r << ": " << conns[r].status.message();
  ASSERT_EQ(strangers.size(), 4u);
  for (auto& s : strangers) EXPECT_TRUE(s.closedWithin(15)) << s.kind << " was not refused";
  EXPECT_EQ(log.count("refused a data connection"), 4) << log.text();
  EXPECT_EQ(log.count("it sent no hello in time"), 1) << log.text();
  EXPECT_EQ(log.count("wrong hello: not Lanes"), 2) << log.text();
  EXPECT_EQ(log.count("(wrong secret)"), 1) << log.text();
}

}  // namespace
}  // namespace lanes::test
