// Bootstrap tests: unique id, rendezvous of threads as ranks, collectives,
// strangers at the root, failure detection.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <latch>
#include <mutex>
#include <thread>

#include "bootstrap/bootstrap.h"
#include "bootstrap/mesh_channel.h"
#include "bootstrap/rendezvous.h"
#include "bootstrap/wire.h"
#include "tests/unit/bootstrap_ranks.h"

namespace lanes {
namespace {

using testing::FailureLog;
using testing::infoFor;
using testing::newRoot;
using testing::runRanks;

TEST(UniqueId, RoundTrip) {
  UniqueIdData d;
  d.family = AF_INET6;
  d.port = 4242;
  for (int i = 0; i < 16; ++i) d.addr[i] = static_cast<uint8_t>(i + 1);
  for (int i = 0; i < 32; ++i) d.secret[i] = static_cast<uint8_t>(200 - i);
  d.commId = 0x1122334455667788ull;
  lanesUniqueId raw;
  ASSERT_TRUE(encodeUniqueId(d, &raw).isOk());
  UniqueIdData back;
  ASSERT_TRUE(decodeUniqueId(raw, &back).isOk());
  EXPECT_EQ(back.family, AF_INET6);
  EXPECT_EQ(back.port, 4242);
  EXPECT_EQ(std::memcmp(back.addr, d.addr, 16), 0);
  EXPECT_EQ(std::memcmp(back.secret, d.secret, 32), 0);
  EXPECT_EQ(back.commId, d.commId);
}

TEST(UniqueId, RejectsCorruptIds) {
  UniqueIdData d;
  d.family = AF_INET;
  d.port = 1;
  lanesUniqueId good;
  ASSERT_TRUE(encodeUniqueId(d, &good).isOk());
  UniqueIdData out;
  for (int byte : {0, 4, 6}) {  // magic, version, family
    lanesUniqueId bad = good;
    bad.internal[byte] ^= 0x5a;
    Status st = decodeUniqueId(bad, &out);
    EXPECT_EQ(st.code(), lanesInvalidArgument) << "byte " << byte;
    EXPECT_NE(st.message().find("the unique id is corrupt or from another Lanes version"),
              std::string::npos);
  }
  lanesUniqueId zero{};
  EXPECT_EQ(decodeUniqueId(zero, &out).code(), lanesInvalidArgument);
}

TEST(UniqueId, RootPicksAnInterfaceWhenNoAddressGiven) {
  lanesUniqueId raw;
  ASSERT_TRUE(createUniqueIdAndRoot("", nullptr, &raw).isOk());
  UniqueIdData id;
  ASSERT_TRUE(decodeUniqueId(raw, &id).isOk());
  EXPECT_NE(id.port, 0);
  // The root must be reachable at the advertised address: a 1-rank rendezvous.
  std::unique_ptr<Bootstrap> b;
  Status st = Bootstrap::create(id, 1, infoFor(0), Deadline::after(30), &b);
  EXPECT_TRUE(st.isOk()) << st.message();
}

class Rendezvous : public ::testing::TestWithParam<int> {};

TEST_P(Rendezvous, CollectivesAndPointToPointAreCorrect) {
  const int n = GetParam();
  runRanks(n, [n](Bootstrap& b) {
    const int r = b.rank();
    EXPECT_EQ(b.nranks(), n);
    ASSERT_EQ(b.ranks().size(), static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(b.ranks()[i].rank, i);
      EXPECT_EQ(b.ranks()[i].pid, 1000 + i);
    }
    // Consecutive allGathers with different contents must never mix.
    for (int round = 0; round < 3; ++round) {
      std::vector<uint64_t> slots(n * 2, 0);
      slots[2 * r] = 1000ull * round + r;
      slots[2 * r + 1] = ~slots[2 * r];
      ASSERT_TRUE(b.allGather(slots.data(), 2 * sizeof(uint64_t), Deadline::after(60)).isOk());
      for (int i = 0; i < n; ++i) {
        EXPECT_EQ(slots[2 * i], 1000ull * round + i);
        EXPECT_EQ(slots[2 * i + 1], ~(1000ull * round + i));
      }
      ASSERT_TRUE(b.barrier(Deadline::after(60)).isOk());
    }
    // Ring exchange with two tags, delivered per tag in order.
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    for (uint32_t tag : {7u, 8u})
      for (int k = 0; k < 2; ++k) {
        int32_t v = r * 100 + static_cast<int>(tag) * 10 + k;
        ASSERT_TRUE(b.send(next, tag, &v, sizeof(v)).isOk());
      }
    std::vector<uint8_t> got;
    for (uint32_t tag : {8u, 7u})
      for (int k = 0; k < 2; ++k) {
        ASSERT_TRUE(b.recv(prev, tag, &got, Deadline::after(60)).isOk());
        ASSERT_EQ(got.size(), sizeof(int32_t));
        int32_t v;
        std::memcpy(&v, got.data(), sizeof(v));
        EXPECT_EQ(v, prev * 100 + static_cast<int>(tag) * 10 + k);
      }
    ASSERT_TRUE(b.barrier(Deadline::after(60)).isOk());
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, Rendezvous, ::testing::Values(1, 2, 3, 5, 7, 16));

// The all-gather and barrier run through a tree of the ranks, so a rank that
// died must still fail every rank's call at once, not only its tree
// neighbours' (who would leave the rest waiting for the deadline).
TEST(Bootstrap, CollectivesFailAtOnceWhenAnyRankDies) {
  const int n = 8, victim = 5;
  std::vector<Status> gathered(n), barred(n);
  std::vector<double> seconds(n, 0);
  std::latch done(n - 1);  // a survivor's goodbye must not be what the others see
  runRanks(n, [&](Bootstrap& b) {
    const int r = b.rank();
    EXPECT_TRUE(b.barrier(Deadline::after(60)).isOk()) << "rank " << r;
    if (r == victim) {
      dynamic_cast<MeshChannel&>(b).closeAbruptlyForTest();
      return;
    }
    const auto t0 = Clock::now();
    std::vector<int> all(n, -1);
    all[static_cast<size_t>(r)] = r;
    gathered[r] = b.allGather(all.data(), sizeof(int), Deadline::after(60));
    barred[r] = b.barrier(Deadline::after(60));
    seconds[r] = std::chrono::duration<double>(Clock::now() - t0).count();
    done.arrive_and_wait();
  });
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    EXPECT_EQ(gathered[r].code(), lanesRemoteError)
        << "rank " << r << ": " << gathered[r].message();
    EXPECT_NE(gathered[r].message().find("rank 5 (host node1, pid 1005)"), std::string::npos)
        << gathered[r].message();
    EXPECT_EQ(barred[r].code(), lanesRemoteError) << "rank " << r << ": " << barred[r].message();
    EXPECT_LT(seconds[r], 30) << "rank " << r << " waited for the deadline";
  }
}

TEST(Bootstrap, AllGatherOfDifferentSizesIsReported) {
  const int n = 4;
  std::vector<Status> results(n);
  runRanks(n, [&](Bootstrap& b) {
    const int r = b.rank();
    const size_t bytes = r == 2 ? 8 : 4;
    std::vector<uint8_t> all(bytes * n, 0);
    results[r] = b.allGather(all.data(), bytes, Deadline::after(5));
  });
  int reported = 0;
  for (const Status& st : results)
    if (st.code() == lanesInvalidUsage) {
      ++reported;
      EXPECT_NE(st.message().find("called the bootstrap collectives differently"),
                std::string::npos)
          << st.message();
    }
  EXPECT_GT(reported, 0) << "no rank noticed the mismatch";
}

TEST(Bootstrap, StrangersAtTheRootAreDroppedAndRanksStillMeet) {
  UniqueIdData id = newRoot();
  const SocketAddress root = wire::rootAddress(id);
  std::vector<Socket> strangers(4);
  // Garbage bytes.
  ASSERT_TRUE(Socket::connect(root, Deadline::after(10), &strangers[0]).isOk());
  const char junk[64] = "GET / HTTP/1.1\r\nHost: lanes\r\n\r\n";
  ASSERT_TRUE(strangers[0].sendAll(junk, sizeof(junk), Deadline::after(10)).isOk());
  // A well-formed hello with the wrong secret, claiming rank 0.
  ASSERT_TRUE(Socket::connect(root, Deadline::after(10), &strangers[1]).isOk());
  wire::Hello h;
  h.commId = id.commId;
  h.nranks = 3;
  h.rank = 0;
  h.info = infoFor(0);
  h.listen = root;
  auto hello = wire::encodeHello(h, true);
  ASSERT_TRUE(
      sendFrame(strangers[1], wire::kHello, 0, hello.data(), hello.size(), Deadline::after(10))
          .isOk());
  // Silence.
  ASSERT_TRUE(Socket::connect(root, Deadline::after(10), &strangers[2]).isOk());
  // A frame header announcing an absurd length.
  ASSERT_TRUE(Socket::connect(root, Deadline::after(10), &strangers[3]).isOk());
  FrameHeader huge{kFrameMagic, kFrameVersion, wire::kHello, 0, 0, 1ull << 40};
  ASSERT_TRUE(strangers[3].sendAll(&huge, sizeof(huge), Deadline::after(10)).isOk());

  std::vector<std::thread> threads;
  std::vector<int> sums(3, 0);
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      std::unique_ptr<Bootstrap> b;
      Status st = Bootstrap::create(id, 3, infoFor(r), Deadline::after(60), &b);
      ASSERT_TRUE(st.isOk()) << st.message();
      std::vector<int> v(3);
      v[r] = r + 1;
      ASSERT_TRUE(b->allGather(v.data(), sizeof(int), Deadline::after(60)).isOk());
      sums[r] = v[0] + v[1] + v[2];
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(sums, std::vector<int>({6, 6, 6}));
  // The wrong-secret stranger got no table: the root just closed on it.
  uint16_t type;
  uint32_t tag;
  std::vector<uint8_t> payload;
  Status st = recvFrame(strangers[1], &type, &tag, &payload, 1 << 20, Deadline::after(30));
  EXPECT_EQ(st.code(), lanesRemoteError) << st.message();
}

// Two raw clients both claim rank 0 of 2; returns the root's refusal of
// whichever came second (after it, the root has surely fixed nranks at 2).
Status refusalOfDuplicateRankZero(const UniqueIdData& id, Socket* first, Socket* second) {
  const SocketAddress root = wire::rootAddress(id);
  wire::Hello h;
  std::memcpy(h.secret, id.secret, sizeof(h.secret));
  h.commId = id.commId;
  h.nranks = 2;
  h.rank = 0;
  h.info = infoFor(0);
  h.listen = root;
  const auto hello = wire::encodeHello(h, true);
  for (Socket* s : {first, second}) {
    EXPECT_TRUE(Socket::connect(root, Deadline::after(10), s).isOk());
    EXPECT_TRUE(
        sendFrame(*s, wire::kHello, 0, hello.data(), hello.size(), Deadline::after(10)).isOk());
  }
  Deadline d = Deadline::after(60);
  while (!d.expired())
    for (Socket* s : {first, second}) {
      uint16_t type = 0;
      uint32_t tag;
      std::vector<uint8_t> payload;
      if (recvFrame(*s, &type, &tag, &payload, 1 << 16, Deadline::after(0.05)).isOk()) {
        EXPECT_EQ(type, wire::kError);
        return wire::decodeError(payload);
      }
    }
  return timeoutError("the root refused neither duplicate");
}

TEST(Bootstrap, DuplicateRankIsRefused) {
  UniqueIdData id = newRoot();
  Socket first, second;
  Status st = refusalOfDuplicateRankZero(id, &first, &second);
  EXPECT_EQ(st.code(), lanesInvalidUsage) << st.message();
  EXPECT_NE(st.message().find("rank 0 joined twice"), std::string::npos) << st.message();
}

TEST(Bootstrap, MismatchedRankCountIsRefused) {
  UniqueIdData id = newRoot();
  Socket first, second;
  ASSERT_EQ(refusalOfDuplicateRankZero(id, &first, &second).code(), lanesInvalidUsage);
  std::unique_ptr<Bootstrap> bad;
  Status st = Bootstrap::create(id, 3, infoFor(2), Deadline::after(60), &bad);
  EXPECT_EQ(st.code(), lanesInvalidUsage) << st.message();
  EXPECT_NE(st.message().find("rank 2 was started with 3 ranks, rank 0 with 2"), std::string::npos)
      << st.message();
}

// Only the victim's tree neighbours hold a connection to it; the others
// hear of its death passed on from rank to rank.
TEST(Bootstrap, AbruptlyClosedRankIsReportedByEveryPeer) {
  const int n = 8, victim = 2;
  std::vector<FailureLog> logs(n);
  std::vector<Status> recvAfter(n);
  std::vector<int> connectedToVictim(n, -1);
  std::latch beforeCrash(n);
  UniqueIdData id = newRoot();
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      std::unique_ptr<Bootstrap> b;
      ASSERT_TRUE(Bootstrap::create(id, n, infoFor(r), Deadline::after(60), &b).isOk());
      b->setFailureHandler(logs[r].handler());
      ASSERT_TRUE(b->barrier(Deadline::after(60)).isOk());
      connectedToVictim[r] = dynamic_cast<MeshChannel&>(*b).mesh().connected(victim) ? 1 : 0;
      beforeCrash.arrive_and_wait();
      if (r == victim) {
        dynamic_cast<MeshChannel&>(*b).closeAbruptlyForTest();
        return;
      }
      EXPECT_TRUE(logs[r].waitFor(1, 60)) << "rank " << r << " never heard of the crash";
      std::vector<uint8_t> got;
      recvAfter[r] = b->recv(victim, 5, &got, Deadline::after(60));
    });
  for (auto& t : threads) t.join();
  int unconnected = 0;
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    unconnected += connectedToVictim[r] == 0 ? 1 : 0;
    ASSERT_EQ(logs[r].calls.size(), 1u) << "rank " << r;
    EXPECT_EQ(logs[r].calls[0].first, victim);
    const std::string& why = logs[r].calls[0].second;
    EXPECT_NE(why.find("rank 2 (host node0, pid 1002)"), std::string::npos) << why;
    EXPECT_NE(why.find("closed its control connection"), std::string::npos) << why;
    EXPECT_EQ(recvAfter[r].code(), lanesRemoteError);
    EXPECT_NE(recvAfter[r].message().find("rank 2"), std::string::npos);
  }
  // Rank 2's tree neighbours are 0, 5 and 6: four survivors learned it second-hand.
  EXPECT_EQ(unconnected, n - 1 - 3);
}

// A rank whose own connections broke may take every peer for dead and say
// so. A rank still connected to the one reported fails naming the reporter,
// and passes the report no further: rank 3, connected to rank 1 only, hears
// nothing, where a believed death would have reached it blaming rank 0.
TEST(Bootstrap, DeathReportedOfALiveConnectionNamesTheReporterAndStops) {
  const int n = 4, reporter = 2, reported = 0, hearer = 1;
  std::vector<FailureLog> logs(n);
  std::latch told(n);
  runRanks(n, [&](Bootstrap& b) {
    const int r = b.rank();
    b.setFailureHandler(logs[r].handler());
    ASSERT_TRUE(b.barrier(Deadline::after(60)).isOk());
    ControlMesh& mesh = dynamic_cast<MeshChannel&>(b).meshForTest();
    if (r == reporter) {
      const auto notice = wire::encodeFailureNotice(
          reported, "closed its control connection: the process exited or was killed");
      EXPECT_TRUE(mesh.send(hearer, kRootChannel, wire::kLost, 0, notice.data(), notice.size(),
                            Deadline::after(60))
                      .isOk());
    }
    if (r == hearer) {
      EXPECT_TRUE(mesh.connected(reported));
      EXPECT_TRUE(logs[r].waitFor(1, 60)) << "rank 1 never heard the report";
    }
    told.arrive_and_wait();
    // Time for a wrongly passed-on notice to reach rank 3.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  });
  ASSERT_EQ(logs[hearer].calls.size(), 1u);
  EXPECT_EQ(logs[hearer].calls[0].first, reported);
  const std::string& why = logs[hearer].calls[0].second;
  EXPECT_NE(why.find("rank 0 (host node0, pid 1000) was reported gone by rank 2 (host node0, pid "
                     "1002)"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("still open"), std::string::npos) << why;
  EXPECT_EQ(logs[3].count(), 0u) << logs[3].calls[0].second;
  EXPECT_EQ(logs[reported].count(), 0u);
}

// A contradicted report comes true when the reported rank's own connection
// closes: the rank that held it back passes the death on then, so rank 3,
// connected to rank 1 only, still learns that rank 0 died.
TEST(Bootstrap, AContradictedReportComesTrueWhenTheConnectionCloses) {
  const int n = 4, reporter = 2, reported = 0, hearer = 1, behind = 3;
  std::vector<FailureLog> logs(n);
  std::latch told(n), done(n - 1);
  runRanks(n, [&](Bootstrap& b) {
    const int r = b.rank();
    b.setFailureHandler(logs[r].handler());
    ASSERT_TRUE(b.barrier(Deadline::after(60)).isOk());
    if (r == reporter) {
      const auto notice = wire::encodeFailureNotice(reported, "went away");
      EXPECT_TRUE(dynamic_cast<MeshChannel&>(b)
                      .meshForTest()
                      .send(hearer, kRootChannel, wire::kLost, 0, notice.data(), notice.size(),
                            Deadline::after(60))
                      .isOk());
    }
    if (r == hearer) {
      EXPECT_TRUE(logs[r].waitFor(1, 60)) << "rank 1 never heard the report";
    }
    told.arrive_and_wait();
    if (r == reported) {
      dynamic_cast<MeshChannel&>(b).closeAbruptlyForTest();
      return;
    }
    if (r == behind) {
      EXPECT_TRUE(logs[r].waitFor(1, 60)) << "rank 3 never heard of the death";
    }
    // Rank 1 stays until rank 3 heard: it is the only way there.
    done.arrive_and_wait();
  });
  ASSERT_EQ(logs[hearer].calls.size(), 1u);
  EXPECT_NE(logs[hearer].calls[0].second.find("was reported gone by rank 2"), std::string::npos)
      << logs[hearer].calls[0].second;
  ASSERT_EQ(logs[behind].calls.size(), 1u);
  EXPECT_EQ(logs[behind].calls[0].first, reported);
  EXPECT_NE(logs[behind].calls[0].second.find("closed its control connection"), std::string::npos)
      << logs[behind].calls[0].second;
}

// A process opens a control connection only to the ranks it talks to: the
// tree neighbours of the bootstrap's collectives, and the peers of its own
// sends.
// The root sends each rank itself and its tree neighbours only (O(N) bytes in
// all); the ranks gather the rest, so every rank still knows every other.
TEST(Bootstrap, RootSendsTreeNeighboursAndTheRanksGatherTheRest) {
  const int n = 11;
  UniqueIdData id = newRoot();
  std::vector<std::vector<RankInfo>> fromRoot(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      Socket listener;
      std::vector<SocketAddress> listens;
      Status st = joinRoot(id, n, infoFor(r), Deadline::after(60), &listener,
                           &fromRoot[static_cast<size_t>(r)], &listens);
      EXPECT_TRUE(st.isOk()) << "rank " << r << ": " << st.message();
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    std::vector<int> want;
    if (r > 0) want.push_back((r - 1) / 2);
    want.push_back(r);
    for (int c = 2 * r + 1; c <= 2 * r + 2 && c < n; ++c) want.push_back(c);
    std::sort(want.begin(), want.end());
    std::vector<int> got;
    for (const RankInfo& info : fromRoot[static_cast<size_t>(r)]) {
      if (info.rank < 0) continue;
      got.push_back(info.rank);
      EXPECT_EQ(info.pid, infoFor(info.rank).pid);
    }
    EXPECT_EQ(got, want) << "rank " << r;
  }

  runRanks(n, [&](Bootstrap& b) {
    ASSERT_EQ(b.ranks().size(), static_cast<size_t>(n));
    for (int p = 0; p < n; ++p) {
      const RankInfo& info = b.ranks()[static_cast<size_t>(p)];
      EXPECT_EQ(info.rank, p);
      EXPECT_EQ(info.pid, infoFor(p).pid);
      EXPECT_STREQ(info.hostname, infoFor(p).hostname);
    }
    // Any pair can talk: the gathered listen addresses are right.
    const int r = b.rank();
    const int to = (r + n / 2) % n;
    const int from = (r - n / 2 + n) % n;
    int x = 100 + r;
    ASSERT_TRUE(b.send(to, 3, &x, sizeof(x)).isOk());
    std::vector<uint8_t> got;
    ASSERT_TRUE(b.recv(from, 3, &got, Deadline::after(60)).isOk());
    ASSERT_EQ(got.size(), sizeof(int));
    int y = 0;
    std::memcpy(&y, got.data(), sizeof(y));
    EXPECT_EQ(y, 100 + from);
    ASSERT_TRUE(b.barrier(Deadline::after(60)).isOk());
  });
}

TEST(WireTable, DecodingRefusesMalformedTables) {
  std::vector<RankInfo> ranks(6);
  std::vector<SocketAddress> listens(6);
  for (int r = 0; r < 6; ++r)
    ASSERT_TRUE(SocketAddress::parse("127.0.0.1:" + std::to_string(4000 + r),
                                     &listens[static_cast<size_t>(r)])
                    .isOk());
  for (int r : {0, 1, 2}) ranks[static_cast<size_t>(r)] = infoFor(r);
  const auto good = wire::encodeTable(ranks, listens);
  std::vector<RankInfo> outRanks;
  std::vector<SocketAddress> outListens;
  ASSERT_TRUE(wire::decodeTable(good, 6, &outRanks, &outListens).isOk());
  EXPECT_EQ(outRanks[1].pid, infoFor(1).pid);
  EXPECT_EQ(outListens[2].port(), 4002);
  EXPECT_EQ(outRanks[4].rank, -1);  // not sent
  EXPECT_FALSE(wire::decodeTable(good, 7, &outRanks, &outListens).isOk());
  // More entries than a rank's tree neighbours and itself.
  for (int r : {3, 4}) ranks[static_cast<size_t>(r)] = infoFor(r);
  EXPECT_FALSE(
      wire::decodeTable(wire::encodeTable(ranks, listens), 6, &outRanks, &outListens).isOk());
  // An entry twice.
  ranks.assign(6, RankInfo{});
  ranks[2] = infoFor(2);
  auto twice = wire::encodeTable(ranks, listens);
  const size_t entry = twice.size() - 2 * sizeof(int32_t);
  twice.insert(twice.end(), twice.end() - static_cast<long>(entry), twice.end());
  const int32_t two = 2;
  std::memcpy(twice.data() + sizeof(int32_t), &two, sizeof(two));
  EXPECT_FALSE(wire::decodeTable(twice, 6, &outRanks, &outListens).isOk());
  EXPECT_LE(good.size(), wire::maxTableBytes(wire::kMaxTableEntries));
}

TEST(Bootstrap, ConnectionsOpenOnlyWherePairsTalk) {
  const int n = 16;
  std::vector<std::vector<int>> connected(n), afterSend(n);
  runRanks(n, [&](Bootstrap& b) {
    const int r = b.rank();
    std::vector<int> all(n, -1);
    all[static_cast<size_t>(r)] = r;
    ASSERT_TRUE(b.allGather(all.data(), sizeof(int), Deadline::after(60)).isOk());
    for (int p = 0; p < n; ++p) EXPECT_EQ(all[static_cast<size_t>(p)], p);
    const ControlMesh& mesh = dynamic_cast<MeshChannel&>(b).mesh();
    for (int p = 0; p < n; ++p)
      if (mesh.connected(p)) connected[r].push_back(p);
    ASSERT_TRUE(b.barrier(Deadline::after(60)).isOk());
    // Rank 3 and rank 12 are not tree neighbours; a send connects them.
    int x = 7;
    if (r == 3) {
      ASSERT_TRUE(b.send(12, 1, &x, sizeof(x)).isOk());
    } else if (r == 12) {
      std::vector<uint8_t> got;
      ASSERT_TRUE(b.recv(3, 1, &got, Deadline::after(60)).isOk());
    }
    ASSERT_TRUE(b.barrier(Deadline::after(60)).isOk());
    for (int p = 0; p < n; ++p)
      if (mesh.connected(p)) afterSend[r].push_back(p);
    ASSERT_TRUE(b.barrier(Deadline::after(60)).isOk());
  });
  for (int r = 0; r < n; ++r) {
    std::vector<int> tree;
    if (r > 0) tree.push_back((r - 1) / 2);
    for (int c = 2 * r + 1; c <= 2 * r + 2 && c < n; ++c) tree.push_back(c);
    std::sort(tree.begin(), tree.end());
    EXPECT_EQ(connected[r], tree) << "rank " << r;
    if (r == 3 || r == 12) {
      tree.push_back(r == 3 ? 12 : 3);
      std::sort(tree.begin(), tree.end());
    }
    EXPECT_EQ(afterSend[r], tree) << "rank " << r;
  }
}

// Ranks 2 and 3 of 4 are no tree neighbours: sending to each other at once,
// both connect, and the pair keeps two connections. Frames stay in order on
// each side's own, and one rank leaving is no failure for the other though
// one connection closes before the other.
TEST(Bootstrap, PairThatConnectsAtOnceKeepsOrderAndLeavesCleanly) {
  const int n = 4;
  std::vector<FailureLog> logs(n);
  std::vector<Status> recvAfter(n);
  std::latch both(2);
  runRanks(n, [&](Bootstrap& b) {
    const int r = b.rank();
    b.setFailureHandler(logs[r].handler());
    ASSERT_TRUE(b.barrier(Deadline::after(60)).isOk());
    if (r == 2 || r == 3) {
      const int other = 5 - r;
      both.arrive_and_wait();
      for (int i = 0; i < 200; ++i) ASSERT_TRUE(b.send(other, 4, &i, sizeof(i)).isOk());
      for (int i = 0; i < 200; ++i) {
        std::vector<uint8_t> got;
        ASSERT_TRUE(b.recv(other, 4, &got, Deadline::after(60)).isOk());
        int v = -1;
        std::memcpy(&v, got.data(), sizeof(v));
        ASSERT_EQ(v, i) << "rank " << r;
      }
    }
    ASSERT_TRUE(b.barrier(Deadline::after(60)).isOk());
    if (r == 3) {
      b.shutdown();
      return;
    }
    if (r == 2) {
      std::vector<uint8_t> got;
      recvAfter[r] = b.recv(3, 9, &got, Deadline::after(60));
    }
  });
  for (int r = 0; r < n; ++r)
    EXPECT_TRUE(logs[r].calls.empty()) << "rank " << r << ": " << logs[r].calls[0].second;
  EXPECT_EQ(recvAfter[2].code(), lanesRemoteError);
  EXPECT_NE(recvAfter[2].message().find("already left"), std::string::npos)
      << recvAfter[2].message();
}

TEST(Bootstrap, NormalShutdownIsNotAFailure) {
  const int n = 3, leaver = 1;
  std::vector<FailureLog> logs(n);
  std::vector<Status> recvAfter(n);
  runRanks(n, [&](Bootstrap& b) {
    const int r = b.rank();
    b.setFailureHandler(logs[r].handler());
    ASSERT_TRUE(b.barrier(Deadline::after(60)).isOk());
    if (r == leaver) {
      b.shutdown();
      b.shutdown();  // idempotent
      return;
    }
    std::vector<uint8_t> got;
    recvAfter[r] = b.recv(leaver, 3, &got, Deadline::after(60));
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(logs[r].calls.empty()) << "rank " << r << ": " << logs[r].calls[0].second;
    if (r == leaver) continue;
    EXPECT_EQ(recvAfter[r].code(), lanesRemoteError);
    EXPECT_NE(recvAfter[r].message().find("rank 1 (host node1, pid 1001) already left"),
              std::string::npos)
        << recvAfter[r].message();
  }
}

TEST(Bootstrap, SpreadFailureReachesEveryOtherRank) {
  const int n = 4;
  std::vector<FailureLog> logs(n);
  std::latch handlersSet(n), allHeard(n);
  runRanks(n, [&](Bootstrap& b) {
    const int r = b.rank();
    b.setFailureHandler(logs[r].handler());
    handlersSet.arrive_and_wait();
    if (r == 0) b.spreadFailure(3, "its transport timed out");
    if (r == 1) b.spreadFailure(1, "it ran out of memory");  // aborting itself
    if (r == 2) {
      EXPECT_TRUE(logs[r].waitFor(2, 60));
    } else if (r == 0 || r == 3) {
      EXPECT_TRUE(logs[r].waitFor(1, 60));
    }
    // Nobody leaves before every notice arrived (a goodbye would overtake them).
    allHeard.arrive_and_wait();
  });
  // Rank 2 learns both: 3 failed (from 0) and 1 is aborting.
  bool saw3 = false, saw1 = false;
  for (auto& [rank, why] : logs[2].calls) {
    if (rank == 3) {
      saw3 = true;
      EXPECT_NE(why.find("as rank 0"), std::string::npos) << why;
      EXPECT_NE(why.find("its transport timed out"), std::string::npos) << why;
    }
    if (rank == 1) {
      saw1 = true;
      EXPECT_NE(why.find("is aborting: it ran out of memory"), std::string::npos) << why;
    }
  }
  EXPECT_TRUE(saw3);
  EXPECT_TRUE(saw1);
  // Rank 3 (the one reported) hears of rank 1's abort only.
  ASSERT_FALSE(logs[3].calls.empty());
  for (auto& call : logs[3].calls) EXPECT_EQ(call.first, 1);
}

TEST(Bootstrap, FailuresBeforeTheHandlerAreReportedOnce) {
  const int n = 2;
  FailureLog log;
  UniqueIdData id = newRoot();
  std::unique_ptr<Bootstrap> b1;
  std::thread t1(
      [&] { ASSERT_TRUE(Bootstrap::create(id, n, infoFor(1), Deadline::after(60), &b1).isOk()); });
  std::unique_ptr<Bootstrap> b0;
  ASSERT_TRUE(Bootstrap::create(id, n, infoFor(0), Deadline::after(60), &b0).isOk());
  t1.join();
  ASSERT_TRUE(b1);
  dynamic_cast<MeshChannel&>(*b1).closeAbruptlyForTest();
  std::vector<uint8_t> got;
  // Once recv fails, the monitor has seen the death, with no handler yet.
  EXPECT_EQ(b0->recv(1, 1, &got, Deadline::after(60)).code(), lanesRemoteError);
  b0->setFailureHandler(log.handler());
  ASSERT_TRUE(log.waitFor(1, 60));
  ASSERT_EQ(log.calls.size(), 1u);
  EXPECT_EQ(log.calls[0].first, 1);
}

TEST(Bootstrap, ProgressArrivesInOrderWithData) {
  runRanks(2, [](Bootstrap& b) {
    if (b.rank() == 0) {
      EXPECT_EQ(b.peerProgress(1), -1);
      b.reportProgress(42);
      int x = 1;
      ASSERT_TRUE(b.send(1, 9, &x, sizeof(x)).isOk());
    } else {
      std::vector<uint8_t> got;
      ASSERT_TRUE(b.recv(0, 9, &got, Deadline::after(60)).isOk());
      EXPECT_EQ(b.peerProgress(0), 42);  // sent before the data on the same stream
    }
    ASSERT_TRUE(b.barrier(Deadline::after(60)).isOk());
  });
}

TEST(Bootstrap, RecvTimesOutNamingPeerAndTag) {
  runRanks(2, [](Bootstrap& b) {
    if (b.rank() == 0) {
      std::vector<uint8_t> got;
      Status st = b.recv(1, 99, &got, Deadline::after(0.2));
      EXPECT_EQ(st.code(), lanesTimeout);
      EXPECT_NE(st.message().find("tag 99"), std::string::npos) << st.message();
      EXPECT_NE(st.message().find("rank 1 (host node1, pid 1001)"), std::string::npos)
          << st.message();
    }
    ASSERT_TRUE(b.barrier(Deadline::after(60)).isOk());
  });
}

TEST(Bootstrap, RejectsReservedTagsAndBadPeers) {
  runRanks(2, [](Bootstrap& b) {
    int x = 0;
    EXPECT_EQ(b.send(1 - b.rank(), kReservedTagBase, &x, sizeof(x)).code(), lanesInvalidArgument);
    EXPECT_EQ(b.send(5, 1, &x, sizeof(x)).code(), lanesInvalidArgument);
    std::vector<uint8_t> got;
    EXPECT_EQ(b.recv(-1, 1, &got, Deadline::after(1)).code(), lanesInvalidArgument);
    // Sending to oneself works.
    x = 17;
    ASSERT_TRUE(b.send(b.rank(), 2, &x, sizeof(x)).isOk());
    ASSERT_TRUE(b.recv(b.rank(), 2, &got, Deadline::after(1)).isOk());
    EXPECT_EQ(got.size(), sizeof(int));
    ASSERT_TRUE(b.barrier(Deadline::after(60)).isOk());
  });
}

TEST(Bootstrap, CreateRejectsBadRank) {
  UniqueIdData id;
  std::unique_ptr<Bootstrap> b;
  EXPECT_EQ(Bootstrap::create(id, 2, infoFor(2), Deadline::after(1), &b).code(),
            lanesInvalidArgument);
  EXPECT_EQ(Bootstrap::create(id, 0, infoFor(0), Deadline::after(1), &b).code(),
            lanesInvalidArgument);
}

}  // namespace
}  // namespace lanes
