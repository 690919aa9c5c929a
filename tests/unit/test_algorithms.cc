// Algorithms: the capability table, a static check that every rank's sends
// match its peers' receives byte for byte, and real runs of every (algorithm,
// collective) pair on N thread-ranks over a loopback mesh, compared with a
// reference computed here.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <ostream>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "algorithms/algorithm.h"
#include "base/deadline.h"
#include "exec/host_executor.h"
#include "transport/common/loopback.h"

namespace lanes {
namespace {

// The hierarchical all-reduce with no hosts given is one host's two steps.
constexpr AlgoId kAlgos[] = {AlgoId::Ring,         AlgoId::RecursiveDoubling,
                             AlgoId::Chain,        AlgoId::Pairwise,
                             AlgoId::Direct,       AlgoId::Tree,
                             AlgoId::Hierarchical, AlgoId::HalvingDoubling};
constexpr CollType kColls[] = {CollType::AllReduce, CollType::Broadcast,     CollType::Reduce,
                               CollType::AllGather, CollType::ReduceScatter, CollType::AlltoAll,
                               CollType::Gather,    CollType::Scatter};
constexpr int kRankCounts[] = {1, 2, 3, 4, 5, 7, 8};
constexpr size_t kCounts[] = {0, 1, 7, 1023, 1025, 300000};

// ---------------------------------------------------------------------------
// Buffers of one rank laid out per NCCL semantics. Buffers a rank must not
// touch (a non-root's recvbuff in reduce, ...) are null, so an algorithm that
// touches them crashes the test instead of passing by luck.

struct RankBuffers {
  std::vector<std::byte> sendStore, recvStore;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t sendBytes = 0, recvBytes = 0;  // sizes of the regions send/recv point at
};

// Elements in the send and recv buffers of `rank` (0 where the buffer is unused).
std::pair<size_t, size_t> bufferCounts(CollType c, size_t count, int n, int rank, int root) {
  const size_t all = count * size_t(n);
  const bool isRoot = rank == root;
  switch (c) {
    case CollType::AllReduce:
      return {count, count};
    case CollType::Broadcast:
      return {isRoot ? count : 0, count};
    case CollType::Reduce:
      return {count, isRoot ? count : 0};
    case CollType::AllGather:
      return {count, all};
    case CollType::ReduceScatter:
      return {all, count};
    case CollType::AlltoAll:
      return {all, all};
    case CollType::Gather:
      return {count, isRoot ? all : 0};
    case CollType::Scatter:
      return {isRoot ? all : 0, count};
  }
  return {0, 0};
}

RankBuffers makeBuffers(CollType c, size_t count, size_t esz, int n, int rank, int root,
                        bool inPlace) {
  RankBuffers b;
  auto [sc, rc] = bufferCounts(c, count, n, rank, root);
  b.sendBytes = sc * esz;
  b.recvBytes = rc * esz;
  // In place as NCCL defines it: the smaller buffer is block `rank` (or `root`'s
  // block for gather/scatter) of the larger one, or both are the same buffer.
  const bool rootOnlyInPlace = c == CollType::Gather || c == CollType::Scatter;
  const bool canInPlace = inPlace && sc > 0 && rc > 0 && (!rootOnlyInPlace || rank == root);
  if (canInPlace) {
    const size_t block = rootOnlyInPlace ? size_t(root) : size_t(rank);
    if (sc == rc) {
      b.recvStore.resize(b.recvBytes + 1);
      b.recv = b.recvStore.data();
      b.send = b.recv;
    } else if (rc > sc) {
      b.recvStore.resize(b.recvBytes + 1);
      b.recv = b.recvStore.data();
      b.send = b.recvStore.data() + block * count * esz;
    } else {
      b.sendStore.resize(b.sendBytes + 1);
      b.send = b.sendStore.data();
      b.recv = b.sendStore.data() + block * count * esz;
    }
    return b;
  }
  // The +1 keeps zero-byte buffers distinct non-null pointers, as a user's would be.
  if (sc > 0 || c == CollType::AllReduce) {
    b.sendStore.resize(b.sendBytes + 1);
    b.send = b.sendStore.data();
  }
  if (rc > 0 || c == CollType::AllReduce) {
    b.recvStore.resize(b.recvBytes + 1);
    b.recv = b.recvStore.data();
  }
  return b;
}

CollArgs argsFor(CollType c, size_t count, lanesDataType_t type, RedOpKind op, int n, int rank,
                 int root, const RankBuffers& b) {
  CollArgs a;
  a.coll = c;
  a.send = b.send;
  a.recv = b.recv;
  a.count = count;
  a.type = type;
  a.redop = op;
  a.root = root;
  a.rank = rank;
  a.nranks = n;
  return a;
}

// ---------------------------------------------------------------------------
// Capability table and names.

TEST(Algorithms, NamesRoundTrip) {
  for (AlgoId a : kAlgos) {
    AlgoId parsed{};
    ASSERT_TRUE(parseAlgoName(algoName(a), &parsed)) << algoName(a);
    EXPECT_EQ(parsed, a);
  }
  AlgoId parsed{};
  EXPECT_TRUE(parseAlgoName("RING", &parsed));
  EXPECT_EQ(parsed, AlgoId::Ring);
  EXPECT_FALSE(parseAlgoName("tree-of-doom", &parsed));
  EXPECT_FALSE(parseAlgoName(nullptr, &parsed));
  for (CollType c : kColls) EXPECT_STRNE(collTypeName(c), "unknown");
}

TEST(Algorithms, UnsupportedPairsAreInvalidUsage) {
  int supported = 0;
  for (AlgoId a : kAlgos) {
    for (CollType c : kColls) {
      RankBuffers b = makeBuffers(c, 4, 4, 4, 0, 0, false);
      ScratchPool pool;
      Schedule s(pool);
      Status st = buildSchedule(a, argsFor(c, 4, lanesFloat32, RedOpKind::Sum, 4, 0, 0, b), &s);
      if (algoSupports(a, c)) {
        ++supported;
        EXPECT_TRUE(st.isOk()) << algoName(a) << "/" << collTypeName(c) << ": " << st.message();
        EXPECT_FALSE(s.steps.empty()) << algoName(a) << "/" << collTypeName(c);
      } else {
        EXPECT_EQ(st.code(), lanesInvalidUsage) << algoName(a) << "/" << collTypeName(c);
        EXPECT_NE(st.message().find(algoName(a)), std::string::npos) << st.message();
      }
    }
  }
  EXPECT_EQ(supported, 20);
  // Every collective has at least one algorithm.
  for (CollType c : kColls) {
    EXPECT_TRUE(std::any_of(std::begin(kAlgos), std::end(kAlgos), [&](AlgoId a) {
      return algoSupports(a, c);
    })) << collTypeName(c);
  }
}

TEST(Algorithms, RecursiveDoublingAllGatherNeedsPowerOfTwo) {
  EXPECT_TRUE(algoSupports(AlgoId::RecursiveDoubling, CollType::AllGather, 8));
  EXPECT_FALSE(algoSupports(AlgoId::RecursiveDoubling, CollType::AllGather, 6));
  EXPECT_TRUE(algoSupports(AlgoId::RecursiveDoubling, CollType::AllReduce, 6));
  RankBuffers b = makeBuffers(CollType::AllGather, 4, 4, 6, 1, 0, false);
  ScratchPool pool;
  Schedule s(pool);
  Status st =
      buildSchedule(AlgoId::RecursiveDoubling,
                    argsFor(CollType::AllGather, 4, lanesFloat32, RedOpKind::Sum, 6, 1, 0, b), &s);
  EXPECT_EQ(st.code(), lanesInvalidUsage);
  EXPECT_NE(st.message().find("power-of-two"), std::string::npos) << st.message();
}

TEST(Algorithms, HalvingDoublingReduceScatterNeedsPowerOfTwo) {
  EXPECT_TRUE(algoSupports(AlgoId::HalvingDoubling, CollType::ReduceScatter, 8));
  EXPECT_FALSE(algoSupports(AlgoId::HalvingDoubling, CollType::ReduceScatter, 6));
  EXPECT_TRUE(algoSupports(AlgoId::HalvingDoubling, CollType::AllReduce, 6));
  RankBuffers b = makeBuffers(CollType::ReduceScatter, 4, 4, 6, 1, 0, false);
  ScratchPool pool;
  Schedule s(pool);
  Status st = buildSchedule(
      AlgoId::HalvingDoubling,
      argsFor(CollType::ReduceScatter, 4, lanesFloat32, RedOpKind::Sum, 6, 1, 0, b), &s);
  EXPECT_EQ(st.code(), lanesInvalidUsage);
  EXPECT_NE(st.message().find("power-of-two"), std::string::npos) << st.message();
}

// log2(p) rounds each way, where the ring takes n - 1 steps each way: 4 ranks
// exchange with 2 partners, the extra 5th folds into rank 0 and back.
TEST(Algorithms, HalvingDoublingTalksToItsPartnersOnly) {
  for (int n : {4, 5}) {
    for (int r = 0; r < n; ++r) {
      RankBuffers b = makeBuffers(CollType::AllReduce, 1000, 1000, n, r, 0, false);
      ScratchPool pool;
      Schedule s(pool);
      ASSERT_TRUE(buildSchedule(
                      AlgoId::HalvingDoubling,
                      argsFor(CollType::AllReduce, 1000, lanesFloat32, RedOpKind::Sum, n, r, 0, b),
                      &s)
                      .isOk());
      std::vector<int> peers;
      for (const Step& st : s.steps)
        for (const Op& op : st.ops) {
          if (op.sendPeer >= 0) peers.push_back(op.sendPeer);
          if (op.recvPeer >= 0) peers.push_back(op.recvPeer);
        }
      std::sort(peers.begin(), peers.end());
      peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
      std::vector<int> want;
      if (r >= 4) {
        want = {r - 4};
      } else {
        want = {r ^ 1, r ^ 2};
        if (r + 4 < n) want.push_back(r + 4);
        std::sort(want.begin(), want.end());
      }
      EXPECT_EQ(peers, want) << "n=" << n << " rank " << r;
      const size_t rounds = r >= 4 ? 2 : (r + 4 < n ? 6 : 4);
      EXPECT_EQ(s.steps.size(), rounds) << "n=" << n << " rank " << r;
    }
  }
}

TEST(Algorithms, RejectsBadRankAndRoot) {
  RankBuffers b = makeBuffers(CollType::Broadcast, 4, 4, 4, 0, 0, false);
  ScratchPool pool;
  Schedule s(pool);
  EXPECT_EQ(
      buildSchedule(AlgoId::Chain,
                    argsFor(CollType::Broadcast, 4, lanesFloat32, RedOpKind::Sum, 4, 0, 4, b), &s)
          .code(),
      lanesInvalidArgument);
  EXPECT_EQ(
      buildSchedule(AlgoId::Chain,
                    argsFor(CollType::Broadcast, 4, lanesFloat32, RedOpKind::Sum, 4, 5, 0, b), &s)
          .code(),
      lanesInvalidArgument);
}

// ---------------------------------------------------------------------------
// Static check: without running anything, the byte counts rank a sends to b
// (in step order, FIFO within a step) equal those b receives from a, every
// peer is a real other rank, and every op that touches a user buffer stays
// inside it and never writes the (const) send buffer of an out-of-place call.

struct Range {
  const std::byte* lo;
  const std::byte* hi;
  bool contains(const void* p, size_t bytes) const {
    auto* b = static_cast<const std::byte*>(p);
    return b >= lo && b + bytes <= hi;
  }
  bool overlaps(const void* p, size_t bytes) const {
    auto* b = static_cast<const std::byte*>(p);
    return b < hi && b + bytes > lo;
  }
};

bool sends(OpKind k) {
  return k == OpKind::Send || k == OpKind::RecvSend || k == OpKind::RecvReduceSend;
}
bool recvs(OpKind k) {
  return k == OpKind::Recv || k == OpKind::RecvReduce || k == OpKind::RecvSend ||
         k == OpKind::RecvReduceSend;
}

// Checks the schedules of all ranks against each other and against the user
// buffers each rank passed; returns "" or what is wrong.
std::string checkSchedules(const std::vector<Schedule>& scheds,
                           const std::vector<RankBuffers>& bufs) {
  const int n = int(scheds.size());
  // sent[{a, b}] and got[{a, b}]: byte counts of transfers a -> b, in FIFO order.
  std::map<std::pair<int, int>, std::vector<size_t>> sent, got;
  for (int r = 0; r < n; ++r) {
    const RankBuffers& b = bufs[r];
    auto* sendLo = static_cast<const std::byte*>(b.send);
    auto* recvLo = static_cast<const std::byte*>(b.recv);
    const Range sendR{sendLo, sendLo + (sendLo ? b.sendBytes : 0)};
    const Range recvR{recvLo, recvLo + (recvLo ? b.recvBytes : 0)};
    const bool aliased =
        b.send != nullptr && b.recv != nullptr &&
        (b.send == b.recv || sendR.overlaps(b.recv, b.recvBytes) || recvR.overlaps(b.send, 1));
    auto inUser = [&](const void* p, size_t bytes) {
      return sendR.contains(p, bytes) || recvR.contains(p, bytes);
    };
    auto touchesUser = [&](const void* p, size_t bytes) {
      return sendR.overlaps(p, bytes) || recvR.overlaps(p, bytes);
    };
    for (size_t si = 0; si < scheds[r].steps.size(); ++si) {
      for (const Op& op : scheds[r].steps[si].ops) {
        const std::string where =
            "rank " + std::to_string(r) + " step " + std::to_string(si) + " " + opKindName(op.kind);
        if (op.bytes == 0) return where + ": zero-byte op";
        if (sends(op.kind)) {
          if (op.sendPeer < 0 || op.sendPeer >= n || op.sendPeer == r)
            return where + ": bad send peer " + std::to_string(op.sendPeer);
          sent[{r, op.sendPeer}].push_back(op.bytes);
        }
        if (recvs(op.kind)) {
          if (op.recvPeer < 0 || op.recvPeer >= n || op.recvPeer == r)
            return where + ": bad recv peer " + std::to_string(op.recvPeer);
          got[{op.recvPeer, r}].push_back(op.bytes);
        }
        const bool readsSrc = op.kind == OpKind::Send || op.kind == OpKind::Copy ||
                              op.kind == OpKind::RecvReduce || op.kind == OpKind::RecvReduceSend;
        if (readsSrc) {
          if (op.src == nullptr) return where + ": null src";
          if (touchesUser(op.src, op.bytes) && !inUser(op.src, op.bytes))
            return where + ": src runs past a user buffer";
        }
        if (op.kind != OpKind::Send && op.kind != OpKind::RecvSend && op.dst == nullptr)
          return where + ": null dst";
        if (op.dst != nullptr) {
          if (!aliased && sendR.overlaps(op.dst, op.bytes))
            return where + ": writes the send buffer of an out-of-place call";
          if (touchesUser(op.dst, op.bytes) && !inUser(op.dst, op.bytes))
            return where + ": dst runs past a user buffer";
        }
      }
    }
  }
  for (const auto& [pair, seq] : sent) {
    auto it = got.find(pair);
    if (it == got.end() || it->second != seq)
      return "rank " + std::to_string(pair.first) + " sends " + std::to_string(seq.size()) +
             " messages to rank " + std::to_string(pair.second) + " that it does not receive alike";
  }
  for (const auto& [pair, seq] : got) {
    if (sent.find(pair) == sent.end())
      return "rank " + std::to_string(pair.second) + " waits for rank " +
             std::to_string(pair.first) + " that never sends";
  }
  return "";
}

std::string staticCheck(AlgoId algo, CollType c, int n, size_t count, bool inPlace,
                        std::span<const int> order = {}, std::span<const int> hostOf = {}) {
  const int root = n > 1 ? n - 1 : 0;
  std::vector<RankBuffers> bufs;
  ScratchPool pool;
  std::vector<Schedule> scheds;
  for (int r = 0; r < n; ++r) scheds.emplace_back(pool);
  for (int r = 0; r < n; ++r) bufs.push_back(makeBuffers(c, count, 4, n, r, root, inPlace));
  for (int r = 0; r < n; ++r) {
    Status st =
        buildSchedule(algo, argsFor(c, count, lanesFloat32, RedOpKind::Sum, n, r, root, bufs[r]),
                      &scheds[r], order, hostOf);
    if (!st) return "rank " + std::to_string(r) + ": " + st.message();
  }
  // A ring's rank talks only to its neighbours in the order.
  for (int p = 0; p < int(order.size()) && algo == AlgoId::Ring; ++p) {
    const int r = order[p], next = order[(p + 1) % n], prev = order[(p + n - 1) % n];
    for (const Step& step : scheds[r].steps)
      for (const Op& op : step.ops)
        if ((sends(op.kind) && op.sendPeer != next) || (recvs(op.kind) && op.recvPeer != prev))
          return "rank " + std::to_string(r) + " at ring position " + std::to_string(p) +
                 " talks to a rank that is not its neighbour";
  }
  return checkSchedules(scheds, bufs);
}

TEST(Algorithms, StaticSendRecvMatch) {
  int checked = 0;
  for (AlgoId a : kAlgos) {
    for (CollType c : kColls) {
      for (int n : kRankCounts) {
        if (!algoSupports(a, c, n)) continue;
        for (size_t count :
             {size_t(0), size_t(1), size_t(3), size_t(7), size_t(1023), size_t(1025)}) {
          for (bool inPlace : {false, true}) {
            std::string err = staticCheck(a, c, n, count, inPlace);
            EXPECT_EQ(err, "") << algoName(a) << "/" << collTypeName(c) << " n=" << n
                               << " count=" << count << (inPlace ? " in-place" : "");
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 500);
}

// The static check itself must catch a mismatch, a missing sender and an op
// that runs past a user buffer.
TEST(Algorithms, StaticCheckCatchesBrokenSchedules) {
  std::vector<RankBuffers> bufs(2);
  for (int r = 0; r < 2; ++r) bufs[r] = makeBuffers(CollType::AllReduce, 8, 4, 2, r, 0, false);
  auto twoRanks = [&](size_t sendBytes, size_t recvBytes) {
    ScratchPool pool;
    std::vector<Schedule> s;
    for (int r = 0; r < 2; ++r) s.emplace_back(pool);
    if (sendBytes) {
      s[0].addStep().ops.push_back(Op{OpKind::Send, 1, -1, bufs[0].send, nullptr, sendBytes});
    }
    s[1].addStep().ops.push_back(Op{OpKind::Recv, -1, 0, nullptr, bufs[1].recv, recvBytes});
    return s;
  };
  EXPECT_EQ(checkSchedules(twoRanks(16, 16), bufs), "");
  EXPECT_NE(checkSchedules(twoRanks(16, 12), bufs), "");  // byte counts differ
  EXPECT_NE(checkSchedules(twoRanks(0, 16), bufs), "");   // nobody sends
  EXPECT_NE(checkSchedules(twoRanks(40, 40), bufs), "");  // past the 32-byte buffers
}

// ---------------------------------------------------------------------------
// Runs: N threads, one per rank, each running its own schedule over a
// loopback mesh, then compared with a reference computed here.

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Test data kinds: exact floats (small integers, so any summation order gives the
// same bits and the reference can be exact), inexact floats (order matters: the
// ranks must agree bit for bit, the reference only within tolerance), int32 for
// max and uint8 for prod (both exact in any order).
enum class Data { ExactFloat, InexactFloat, Int32, Uint8 };

struct Config {
  Data data;
  lanesDataType_t type;
  RedOpKind op;
};

void fillElement(Data d, void* p, int rank, size_t i) {
  const uint64_t h = mix((uint64_t(rank) << 40) ^ i);
  switch (d) {
    case Data::ExactFloat: {
      float v = float(int(h % 33) - 16);
      std::memcpy(p, &v, 4);
      break;
    }
    case Data::InexactFloat: {
      float v = float(double(h % 1000003) / 1000003.0 * 2.0 - 1.0) * 1e3f;
      std::memcpy(p, &v, 4);
      break;
    }
    case Data::Int32: {
      int32_t v = int32_t(uint32_t(h));
      std::memcpy(p, &v, 4);
      break;
    }
    case Data::Uint8: {
      uint8_t v = uint8_t(h | 1);  // odd, so products do not collapse to zero
      if (h & 2) v = uint8_t(v + 1);
      std::memcpy(p, &v, 1);
      break;
    }
  }
}

// acc = acc (op) x for one element, in the reference's own arithmetic.
void combine(const Config& cfg, std::byte* acc, const std::byte* x, double* wide) {
  switch (cfg.data) {
    case Data::ExactFloat:
    case Data::InexactFloat: {
      float a, b;
      std::memcpy(&a, acc, 4);
      std::memcpy(&b, x, 4);
      *wide += double(b);
      a = a + b;
      std::memcpy(acc, &a, 4);
      break;
    }
    case Data::Int32: {
      int32_t a, b;
      std::memcpy(&a, acc, 4);
      std::memcpy(&b, x, 4);
      a = std::max(a, b);
      std::memcpy(acc, &a, 4);
      break;
    }
    case Data::Uint8: {
      uint8_t a = uint8_t(*acc), b = uint8_t(*x);
      *acc = std::byte(uint8_t(unsigned(a) * unsigned(b)));
      break;
    }
  }
}

// Element `i` of rank `src`'s input (the value it contributes).
// One element of any datatype by value: the reference runs per element and
// rank, where a heap allocation each made the test take minutes under ASan.
using Element = std::array<std::byte, 8>;

Element inputElement(const Config& cfg, size_t esz, int rank, size_t i) {
  Element e{};
  fillElement(cfg.data, e.data(), rank, i);
  return e;
}

// Runs one case; returns "" or what went wrong.
std::string runCase(AlgoId algo, CollType c, int n, size_t count, bool inPlace, Config cfg,
                    std::span<const int> order = {}, std::span<const int> hostOf = {}) {
  const size_t esz = datatypeSize(cfg.type);
  const int root = n > 1 ? int(count % size_t(n)) : 0;  // vary the root with the count
  std::vector<RankBuffers> bufs;
  for (int r = 0; r < n; ++r) {
    bufs.push_back(makeBuffers(c, count, esz, n, r, root, inPlace));
    RankBuffers& b = bufs[r];
    // Inputs: element i of the send region. Outputs start as garbage (0xAB).
    if (b.recv) std::memset(b.recv, 0xAB, b.recvBytes);
    if (b.send) {
      auto* s = const_cast<std::byte*>(static_cast<const std::byte*>(b.send));
      for (size_t i = 0; i < b.sendBytes / esz; ++i) fillElement(cfg.data, s + i * esz, r, i);
    }
  }
  // Keep copies of the inputs to check that out-of-place calls leave them alone.
  std::vector<std::vector<std::byte>> inputs(n);
  for (int r = 0; r < n; ++r) {
    auto* s = static_cast<const std::byte*>(bufs[r].send);
    if (s) inputs[r].assign(s, s + bufs[r].sendBytes);
  }

  LoopbackMesh mesh(n, 2, 64 * 1024);
  std::vector<Status> results(n);
  std::atomic<bool> failed{false};
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        ScratchPool pool;
        Schedule sched(pool);
        CollArgs a = argsFor(c, count, cfg.type, cfg.op, n, r, root, bufs[r]);
        Status st = buildSchedule(algo, a, &sched, order, hostOf);
        if (st) {
          ExecContext ctx;
          ctx.rank = r;
          ctx.deadline = Deadline::after(60);
          ctx.opLabel = "test";
          ctx.checkAbort = [&] {
            return failed.load() ? remoteError("another rank failed") : Status::ok();
          };
          ConnectionTable table = mesh.table(r);
          LaneSchedule ls{&sched, int(count % 2)};  // same lane on every rank
          st = runSchedules(std::span<const LaneSchedule>(&ls, 1), table, ctx);
        }
        if (!st) failed = true;
        results[r] = std::move(st);
      });
    }
    for (std::thread& t : threads) t.join();
  }
  for (int r = 0; r < n; ++r) {
    if (!results[r]) return "rank " + std::to_string(r) + " failed: " + results[r].message();
  }

  // Expected output of rank r, element by element.
  auto reduced = [&](size_t i, double* wide) {
    Element acc = inputElement(cfg, esz, 0, i);
    double w = 0;
    if (cfg.data == Data::ExactFloat || cfg.data == Data::InexactFloat) {
      float f;
      std::memcpy(&f, acc.data(), 4);
      w = f;
    }
    for (int s = 1; s < n; ++s) combine(cfg, acc.data(), inputElement(cfg, esz, s, i).data(), &w);
    if (wide) *wide = w;
    return acc;
  };
  auto checkReduced = [&](const std::byte* got, size_t i, int r) -> std::string {
    double wide = 0;
    Element want = reduced(i, &wide);
    if (cfg.data == Data::InexactFloat) {
      float g;
      std::memcpy(&g, got, 4);
      if (std::fabs(double(g) - wide) > 1e-2 * n) {
        return "rank " + std::to_string(r) + " element " + std::to_string(i) + ": got " +
               std::to_string(g) + ", want about " + std::to_string(wide);
      }
      return "";
    }
    if (std::memcmp(got, want.data(), esz) != 0)
      return "rank " + std::to_string(r) + " element " + std::to_string(i) + " differs";
    return "";
  };
  auto checkCopied = [&](const std::byte* got, int srcRank, size_t srcIndex, int r,
                         size_t i) -> std::string {
    Element want = inputElement(cfg, esz, srcRank, srcIndex);
    if (std::memcmp(got, want.data(), esz) != 0)
      return "rank " + std::to_string(r) + " element " + std::to_string(i) + " is not element " +
             std::to_string(srcIndex) + " of rank " + std::to_string(srcRank);
    return "";
  };

  for (int r = 0; r < n; ++r) {
    const RankBuffers& b = bufs[r];
    auto* out = static_cast<const std::byte*>(b.recv);
    std::string err;
    switch (c) {
      case CollType::AllReduce:
        // Rank 0's values against the reference; every other rank must hold
        // the same bits, whatever the order of the reduction.
        if (r == 0)
          for (size_t i = 0; i < count && err.empty(); ++i) err = checkReduced(out + i * esz, i, r);
        else if (count > 0 && std::memcmp(out, bufs[0].recv, count * esz) != 0)
          err = "rank " + std::to_string(r) + " result differs bitwise from rank 0's";
        break;
      case CollType::Reduce:
        if (r == root)
          for (size_t i = 0; i < count && err.empty(); ++i) err = checkReduced(out + i * esz, i, r);
        break;
      case CollType::ReduceScatter:
        for (size_t i = 0; i < count && err.empty(); ++i)
          err = checkReduced(out + i * esz, size_t(r) * count + i, r);
        break;
      case CollType::Broadcast:
        for (size_t i = 0; i < count && err.empty(); ++i)
          err = checkCopied(out + i * esz, root, i, r, i);
        break;
      case CollType::AllGather:
        for (size_t i = 0; i < count * size_t(n) && err.empty(); ++i) {
          const int src = int(i / count);
          err = checkCopied(out + i * esz, src, i % count, r, i);
        }
        break;
      case CollType::AlltoAll:
        for (size_t i = 0; i < count * size_t(n) && err.empty(); ++i) {
          const int src = int(i / count);
          err = checkCopied(out + i * esz, src, size_t(r) * count + i % count, r, i);
        }
        break;
      case CollType::Gather:
        if (r == root)
          for (size_t i = 0; i < count * size_t(n) && err.empty(); ++i) {
            const int src = int(i / count);
            err = checkCopied(out + i * esz, src, i % count, r, i);
          }
        break;
      case CollType::Scatter:
        for (size_t i = 0; i < count && err.empty(); ++i)
          err = checkCopied(out + i * esz, root, size_t(r) * count + i, r, i);
        break;
    }
    if (!err.empty()) return err;
    // (memcmp of zero bytes still wants non-null pointers: skip empty inputs.)
    if (!inPlace && b.send && !inputs[r].empty() &&
        std::memcmp(b.send, inputs[r].data(), inputs[r].size()) != 0)
      return "rank " + std::to_string(r) + ": an out-of-place call modified its send buffer";
  }
  return "";
}

struct PairCase {
  AlgoId algo;
  CollType coll;
  Config cfg;
};

std::string caseName(const PairCase& p) {
  static const char* kData[] = {"exactf32sum", "f32sum", "i32max", "u8prod"};
  return std::string(algoName(p.algo)) + "_" + collTypeName(p.coll) + "_" + kData[int(p.cfg.data)];
}

// Readable parameter names in gtest's output instead of a byte dump.
void PrintTo(const PairCase& p, std::ostream* os) { *os << caseName(p); }

class AlgorithmRun : public ::testing::TestWithParam<PairCase> {};

TEST_P(AlgorithmRun, MatchesReference) {
  const PairCase& p = GetParam();
  int ran = 0;
  for (int n : kRankCounts) {
    if (!algoSupports(p.algo, p.coll, n)) continue;
    for (size_t listed : kCounts) {
      // Keep the biggest all-to-all / gather-style runs (n blocks per rank) bounded.
      if (listed > 100000 && n > 5 && !isReduction(p.coll) && p.coll != CollType::Broadcast)
        continue;
      // A reduce-scatter's count is per block, n of them per rank: its biggest
      // run carries an all-reduce's bytes, split among the ranks.
      const size_t count =
          p.coll == CollType::ReduceScatter && listed > 100000 ? listed / n : listed;
      for (bool inPlace : {false, true}) {
        std::string err = runCase(p.algo, p.coll, n, count, inPlace, p.cfg);
        ASSERT_EQ(err, "") << caseName(p) << " n=" << n << " count=" << count
                           << (inPlace ? " in-place" : " out-of-place");
        ++ran;
      }
    }
  }
  EXPECT_GT(ran, 0);
}

std::vector<PairCase> allCases() {
  std::vector<PairCase> out;
  const Config exact{Data::ExactFloat, lanesFloat32, RedOpKind::Sum};
  const Config inexact{Data::InexactFloat, lanesFloat32, RedOpKind::Sum};
  const Config imax{Data::Int32, lanesInt32, RedOpKind::Max};
  const Config u8prod{Data::Uint8, lanesUint8, RedOpKind::Prod};
  for (AlgoId a : kAlgos) {
    for (CollType c : kColls) {
      if (!algoSupports(a, c)) continue;
      if (isReduction(c)) {
        for (const Config& cfg : {exact, inexact, imax, u8prod}) out.push_back({a, c, cfg});
      } else {
        out.push_back({a, c, exact});
        out.push_back({a, c, u8prod});  // odd byte counts exercise granule padding
      }
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Pairs, AlgorithmRun, ::testing::ValuesIn(allCases()),
                         [](const ::testing::TestParamInfo<PairCase>& info) {
                           return caseName(info.param);
                         });

// ---------------------------------------------------------------------------
// The ring in a given order (algorithms/ring_order.h): position p holds rank
// order[p]. Outputs stay indexed by rank, so the same references apply.

constexpr CollType kRingColls[] = {CollType::AllReduce, CollType::ReduceScatter,
                                   CollType::AllGather};
constexpr int kOrderRankCounts[] = {2, 3, 4, 5, 8};

// Non-identity orders of n ranks: evens then odds (sockets alternating),
// the reverse direction, and a fixed shuffle (rank 0 not first).
std::vector<std::vector<int>> ordersFor(int n) {
  std::vector<std::vector<int>> out;
  std::vector<int> o;
  for (int r = 0; r < n; r += 2) o.push_back(r);
  for (int r = 1; r < n; r += 2) o.push_back(r);
  out.push_back(o);
  o = {0};
  for (int r = n - 1; r > 0; --r) o.push_back(r);
  out.push_back(o);
  o.clear();
  for (int r = 0; r < n; ++r) o.push_back(r);
  for (int i = n - 1; i > 0; --i) std::swap(o[i], o[mix(uint64_t(n * 31 + i)) % uint64_t(i + 1)]);
  if (o[0] == 0) std::rotate(o.begin(), o.begin() + 1, o.end());
  out.push_back(o);
  std::vector<std::vector<int>> distinct;
  for (const auto& v : out) {
    bool identity = true;
    for (int p = 0; p < n; ++p) identity = identity && v[p] == p;
    if (!identity && std::find(distinct.begin(), distinct.end(), v) == distinct.end())
      distinct.push_back(v);
  }
  return distinct;
}

std::string orderText(const std::vector<int>& order) {
  std::string t;
  for (int r : order) t += (t.empty() ? "" : " ") + std::to_string(r);
  return t;
}

TEST(Algorithms, RingOrderStaticSendRecvMatch) {
  int checked = 0;
  for (CollType c : kRingColls)
    for (int n : kOrderRankCounts)
      for (const std::vector<int>& order : ordersFor(n))
        for (size_t count :
             {size_t(0), size_t(1), size_t(3), size_t(7), size_t(1023), size_t(1025)})
          for (bool inPlace : {false, true}) {
            EXPECT_EQ(staticCheck(AlgoId::Ring, c, n, count, inPlace, order), "")
                << collTypeName(c) << " n=" << n << " order " << orderText(order)
                << " count=" << count << (inPlace ? " in-place" : "");
            ++checked;
          }
  EXPECT_GT(checked, 300);
}

// The identity given explicitly builds what no order builds; other
// algorithms ignore the order; a bad order is refused.
TEST(Algorithms, RingOrderIdentityAndBadOrders) {
  for (CollType c : kRingColls) {
    for (int r = 0; r < 4; ++r) {
      RankBuffers b = makeBuffers(c, 9, 4, 4, r, 0, false);
      const CollArgs a = argsFor(c, 9, lanesFloat32, RedOpKind::Sum, 4, r, 0, b);
      ScratchPool pool;
      Schedule plain(pool), identity(pool);
      ASSERT_TRUE(buildSchedule(AlgoId::Ring, a, &plain).isOk());
      const std::vector<int> id = {0, 1, 2, 3};
      ASSERT_TRUE(buildSchedule(AlgoId::Ring, a, &identity, id).isOk());
      ASSERT_EQ(plain.steps.size(), identity.steps.size());
      for (size_t i = 0; i < plain.steps.size(); ++i) {
        ASSERT_EQ(plain.steps[i].ops.size(), identity.steps[i].ops.size());
        for (size_t j = 0; j < plain.steps[i].ops.size(); ++j) {
          const Op &x = plain.steps[i].ops[j], &y = identity.steps[i].ops[j];
          EXPECT_TRUE(x.kind == y.kind && x.sendPeer == y.sendPeer && x.recvPeer == y.recvPeer &&
                      x.bytes == y.bytes && x.src == y.src)
              << collTypeName(c) << " rank " << r << " op " << j;
        }
      }
      Schedule s(pool);
      for (const std::vector<int>& bad :
           {std::vector<int>{0, 1, 2}, std::vector<int>{0, 1, 1, 3}, std::vector<int>{0, 1, 2, 4}})
        EXPECT_EQ(buildSchedule(AlgoId::Ring, a, &s, bad).code(), lanesInvalidArgument);
    }
  }
  // Recursive doubling runs whatever the ring's order.
  RankBuffers b = makeBuffers(CollType::AllReduce, 9, 4, 4, 1, 0, false);
  ScratchPool pool;
  Schedule s(pool);
  const std::vector<int> order = {0, 2, 1, 3};
  EXPECT_TRUE(
      buildSchedule(AlgoId::RecursiveDoubling,
                    argsFor(CollType::AllReduce, 9, lanesFloat32, RedOpKind::Sum, 4, 1, 0, b), &s,
                    order)
          .isOk());
}

class RingOrderRun : public ::testing::TestWithParam<PairCase> {};

TEST_P(RingOrderRun, MatchesReference) {
  const PairCase& p = GetParam();
  int ran = 0;
  for (int n : kOrderRankCounts) {
    for (const std::vector<int>& order : ordersFor(n)) {
      for (size_t count :
           {size_t(0), size_t(1), size_t(7), size_t(1023), size_t(1025), size_t(65537)}) {
        for (bool inPlace : {false, true}) {
          std::string err = runCase(p.algo, p.coll, n, count, inPlace, p.cfg, order);
          ASSERT_EQ(err, "") << caseName(p) << " n=" << n << " order " << orderText(order)
                             << " count=" << count << (inPlace ? " in-place" : " out-of-place");
          ++ran;
        }
      }
    }
  }
  EXPECT_GT(ran, 100);
}

std::vector<PairCase> ringCases() {
  std::vector<PairCase> out;
  for (const PairCase& p : allCases())
    if (p.algo == AlgoId::Ring) out.push_back(p);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Ring, RingOrderRun, ::testing::ValuesIn(ringCases()),
                         [](const ::testing::TestParamInfo<PairCase>& info) {
                           return caseName(info.param);
                         });

// ---------------------------------------------------------------------------
// The hierarchical all-reduce over hosts (algorithms/hierarchical.cc): every
// rank's host index, hosts of equal size, in blocks or interleaved with rank
// order; one rank per host and one host are its edge cases.

struct Layout {
  int hosts;
  int local;
  bool interleaved;  // rank r on host r % hosts (else r / local)
};

std::vector<int> hostsOf(const Layout& l) {
  std::vector<int> h;
  for (int r = 0; r < l.hosts * l.local; ++r)
    h.push_back(l.interleaved ? r % l.hosts : r / l.local);
  return h;
}

constexpr Layout kLayouts[] = {{2, 2, false}, {2, 3, false}, {3, 2, false}, {4, 2, true},
                               {2, 4, true},  {3, 3, true},  {4, 1, false}, {1, 4, false}};

TEST(Algorithms, HierarchicalStaticSendRecvMatch) {
  int checked = 0;
  for (CollType c : kRingColls)
    for (const Layout& l : kLayouts) {
      const std::vector<int> hostOf = hostsOf(l);
      for (size_t count : {size_t(0), size_t(1), size_t(3), size_t(7), size_t(1023), size_t(1025)})
        for (bool inPlace : {false, true}) {
          EXPECT_EQ(
              staticCheck(AlgoId::Hierarchical, c, l.hosts * l.local, count, inPlace, {}, hostOf),
              "")
              << collTypeName(c) << " " << l.hosts << " hosts x " << l.local << " count=" << count;
          ++checked;
        }
    }
  EXPECT_GT(checked, 280);
}

// One step talks across hosts (the all-reduce's middle one, the all-gather's
// first, the reduce-scatter's last), and only between ranks of one local
// index; the others stay within each host.
TEST(Algorithms, HierarchicalCrossesHostsInOneStepOnly) {
  const size_t crossStep[] = {1, 1, 0};  // all-reduce, reduce-scatter, all-gather (kRingColls)
  for (size_t ci = 0; ci < std::size(kRingColls); ++ci) {
    const CollType c = kRingColls[ci];
    for (const Layout& l : kLayouts) {
      if (l.hosts < 2 || l.local < 2) continue;
      const std::vector<int> hostOf = hostsOf(l);
      const int n = l.hosts * l.local;
      for (int r = 0; r < n; ++r) {
        RankBuffers b = makeBuffers(c, 4096, 4, n, r, 0, false);
        ScratchPool pool;
        Schedule s(pool);
        ASSERT_TRUE(buildSchedule(AlgoId::Hierarchical,
                                  argsFor(c, 4096, lanesFloat32, RedOpKind::Sum, n, r, 0, b), &s,
                                  {}, hostOf)
                        .isOk());
        ASSERT_EQ(s.steps.size(), c == CollType::AllReduce ? 3u : 2u) << collTypeName(c);
        for (size_t i = 0; i < s.steps.size(); ++i)
          for (const Op& op : s.steps[i].ops)
            for (int peer : {op.sendPeer, op.recvPeer}) {
              if (peer < 0) continue;
              const bool sameHost = hostOf[size_t(peer)] == hostOf[size_t(r)];
              EXPECT_EQ(sameHost, i != crossStep[ci])
                  << collTypeName(c) << " rank " << r << " step " << i << " peer " << peer;
            }
      }
    }
  }
}

TEST(Algorithms, HierarchicalRefusesUnevenHostsAndBadLayouts) {
  const std::vector<int> uneven = {0, 0, 0, 1};
  RankBuffers b = makeBuffers(CollType::AllReduce, 9, 4, 4, 0, 0, false);
  const CollArgs a = argsFor(CollType::AllReduce, 9, lanesFloat32, RedOpKind::Sum, 4, 0, 0, b);
  ScratchPool pool;
  Schedule s(pool);
  Status st = buildSchedule(AlgoId::Hierarchical, a, &s, {}, uneven);
  EXPECT_EQ(st.code(), lanesInvalidUsage);
  EXPECT_NE(st.message().find("same number of ranks on every host"), std::string::npos)
      << st.message();
  const std::vector<int> short3 = {0, 0, 1};
  EXPECT_EQ(buildSchedule(AlgoId::Hierarchical, a, &s, {}, short3).code(), lanesInvalidArgument);
  std::vector<std::vector<int>> groups;
  ASSERT_TRUE(hostGroups(std::vector<int>{1, 0, 1, 0}, 4, &groups).isOk());
  EXPECT_EQ(groups, (std::vector<std::vector<int>>{{0, 2}, {1, 3}}));
}

class HierarchicalRun : public ::testing::TestWithParam<PairCase> {};

TEST_P(HierarchicalRun, MatchesReference) {
  const PairCase& p = GetParam();
  int ran = 0;
  for (const Layout& l : kLayouts) {
    const std::vector<int> hostOf = hostsOf(l);
    const int n = l.hosts * l.local;
    for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1025), size_t(65537)})
      for (bool inPlace : {false, true}) {
        std::string err = runCase(p.algo, p.coll, n, count, inPlace, p.cfg, {}, hostOf);
        ASSERT_EQ(err, "") << caseName(p) << " " << l.hosts << " hosts x " << l.local
                           << (l.interleaved ? " interleaved" : "") << " count=" << count
                           << (inPlace ? " in-place" : " out-of-place");
        ++ran;
      }
  }
  EXPECT_GT(ran, 70);
}

std::vector<PairCase> hierarchicalCases() {
  std::vector<PairCase> out;
  for (const PairCase& p : allCases())
    if (p.algo == AlgoId::Hierarchical) out.push_back(p);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Hosts, HierarchicalRun, ::testing::ValuesIn(hierarchicalCases()),
                         [](const ::testing::TestParamInfo<PairCase>& info) {
                           return caseName(info.param);
                         });

}  // namespace
}  // namespace lanes
