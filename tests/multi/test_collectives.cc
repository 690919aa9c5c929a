// The collective matrix on host buffers: every collective x datatype x
// reduction x in-place/out-of-place x count, on 1..8 ranks, as forked
// processes (most) and as threads (a subset). One communicator per run: init
// is the expensive part, so each run loops over many combinations.
//
// CI runs a sample that still covers every (type, op) pair in both buffer
// modes; LANES_TEST_FULL=1 runs the full cross product.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "tests/multi/data.h"
#include "tests/multi/harness.h"
#include "tests/multi/red_op.h"

namespace lanes::test {
namespace {

enum class Collective {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AlltoAll,
  Gather,
  Scatter,
  SendRecvRing
};

const char* collectiveName(Collective c) {
  switch (c) {
    case Collective::AllReduce:
      return "AllReduce";
    case Collective::Broadcast:
      return "Broadcast";
    case Collective::Reduce:
      return "Reduce";
    case Collective::AllGather:
      return "AllGather";
    case Collective::ReduceScatter:
      return "ReduceScatter";
    case Collective::AlltoAll:
      return "AlltoAll";
    case Collective::Gather:
      return "Gather";
    case Collective::Scatter:
      return "Scatter";
    case Collective::SendRecvRing:
      return "SendRecvRing";
  }
  return "?";
}

void PrintTo(Collective c, std::ostream* os) { *os << collectiveName(c); }

bool isReduction(Collective c) {
  return c == Collective::AllReduce || c == Collective::Reduce || c == Collective::ReduceScatter;
}

// All-to-all has no in-place form. The send/recv ring's: one buffer sent to
// the next rank and overwritten by the previous one's, in one group.
bool hasInPlace(Collective c) { return c != Collective::AlltoAll; }

struct Combo {
  lanesDataType_t type;
  Reduction op;
  size_t count;
  bool inPlace;
  int root;
  uint32_t salt;
  // Out-of-place only: pass NULL for the buffers NCCL calls insignificant
  // (non-root recvbuff of Reduce/Gather, non-root sendbuff of
  // Broadcast/Scatter), as NCCL programs do. Every other combo passes a buffer.
  bool nullInsignificant;
};

std::string comboName(Collective c, const Combo& k) {
  std::string s = strprintf("%s %s", collectiveName(c), typeName(k.type));
  if (isReduction(c)) s += strprintf(" %s", reductionName(k.op));
  s += strprintf(" count=%zu %s root=%d", k.count, k.inPlace ? "in-place" : "out-of-place", k.root);
  return s;
}

constexpr size_t kBigBytes = 3u << 20;  // "3 MiB worth" of elements

// Which combinations a run covers (see the file comment).
std::vector<Combo> planCombos(Collective c, int nranks) {
  std::vector<Combo> out;
  auto add = [&](lanesDataType_t t, Reduction op, size_t count, bool inPlace) {
    if (!hasInPlace(c)) inPlace = false;
    int i = static_cast<int>(out.size());
    out.push_back(
        Combo{t, op, count, inPlace, i % nranks, static_cast<uint32_t>(i * 7919 + 17), i % 2 == 1});
  };
  const std::vector<Reduction> ops =
      isReduction(c) ? std::vector<Reduction>(std::begin(kAllReductions), std::end(kAllReductions))
                     : std::vector<Reduction>{Reduction::Sum};
  const int nops = static_cast<int>(ops.size());
  if (fullMatrix()) {
    for (lanesDataType_t t : kAllTypes)
      for (Reduction op : ops)
        for (size_t count :
             {size_t{0}, size_t{1}, size_t{7}, size_t{4095}, size_t{4097}, kBigBytes / typeSize(t)})
          for (bool inPlace : {false, true}) {
            if (inPlace && !hasInPlace(c)) continue;
            add(t, op, count, inPlace);
          }
    return out;
  }
  for (int ti = 0; ti < static_cast<int>(std::size(kAllTypes)); ++ti) {
    const lanesDataType_t t = kAllTypes[ti];
    // Every (type, op) pair at two awkward counts, once in each buffer mode.
    for (int oi = 0; oi < nops; ++oi) {
      add(t, ops[oi], 7, (ti + oi) % 2 == 0);
      add(t, ops[oi], 4097, (ti + oi) % 2 == 1);
    }
    // Edge counts with the op rotating over types.
    int k = 0;
    for (size_t count : {size_t{0}, size_t{1}, size_t{4095}}) {
      add(t, ops[(ti + k) % nops], count, (ti + k) % 2 == 0);
      ++k;
    }
  }
  // Big messages, the costly part on a 2-core machine: reductions in every
  // type with the op cycling (every op in both buffer modes), data movement
  // once per element size; half of that at 7+ ranks.
  // A reduce-scatter's count is per block and its input holds n blocks: its
  // big messages carry an all-reduce's bytes, split among the ranks (the full
  // matrix above keeps n blocks of kBigBytes). Blocks larger than the shared
  // memory ring are then reduce-scatter's at 2 ranks; every rank count has
  // them in the all-gather, broadcast and reduce below.
  const bool crowded = nranks >= 7;
  const size_t blocks = c == Collective::ReduceScatter ? static_cast<size_t>(nranks) : 1;
  if (isReduction(c)) {
    for (int ti = 0; ti < static_cast<int>(std::size(kAllTypes)); ++ti) {
      if (crowded && (ti + ti / 6) % 2 == 1) continue;  // keeps every op once
      const lanesDataType_t t = kAllTypes[ti];
      add(t, ops[(ti + static_cast<int>(c)) % nops], kBigBytes / typeSize(t) / blocks,
          (ti / 2) % 2 == 1);
    }
  } else {
    int k = 0;
    for (lanesDataType_t t : {lanesInt8, lanesFloat16, lanesFloat32, lanesFloat64}) {
      if (!crowded || t == lanesInt8 || t == lanesFloat32)
        add(t, ops[0], kBigBytes / typeSize(t), k == 1 || k == 2);
      ++k;
    }
  }
  return out;
}

constexpr int kBroadcastDst = 0xffff;  // pattern "destination" for one-to-all data

// Runs one combination on this rank and checks this rank's result (an
// all-reduce's values on the combination's root only). For all-reduce,
// appends the hash of the output to *hashes: the ranks compare them after.
void runCombo(Collective c, const Combo& k, int rank, int n, lanesComm_t comm,
              std::vector<uint64_t>* hashes) {
  const std::string name = comboName(c, k);
  const size_t sz = typeSize(k.type);
  const size_t bytes = k.count * sz;
  const lanesDataType_t t = k.type;
  const bool isRoot = rank == k.root;
  auto check = [&](const std::string& problem, const char* what) {
    RANK_CHECK(problem.empty(), "%s: %s: %s", name.c_str(), what, problem.c_str());
  };
  auto checkUnchanged = [&](const GuardedBuffer& buf, uint64_t before) {
    RANK_CHECK(hashBytes(buf.data(), buf.bytes()) == before,
               "%s: the library modified the out-of-place sendbuff", name.c_str());
  };

  switch (c) {
    case Collective::AllReduce: {
      RedOp op(k.op, t, comm);
      GuardedBuffer send(bytes), recv(bytes);
      GuardedBuffer& in = k.inPlace ? recv : send;
      fillReductionInput(t, k.op, rank, n, in.data(), k.count, 0, k.salt);
      uint64_t sendHash = hashBytes(send.data(), bytes);
      RANK_CHECK_LANES(lanesAllReduce(in.data(), recv.data(), k.count, t, op.get(), comm, nullptr),
                       comm);
      // The values on one rank (it rotates with the combo); the others must
      // hold the same bits, which checkIdenticalOutputs compares by hash.
      if (isRoot)
        check(checkReductionOutput(t, k.op, n, recv.data(), k.count, 0, k.salt), "recvbuff");
      check(recv.checkGuards(), "recvbuff");
      if (!k.inPlace) checkUnchanged(send, sendHash);
      hashes->push_back(hashBytes(recv.data(), bytes));
      break;
    }
    case Collective::Reduce: {
      RedOp op(k.op, t, comm);
      GuardedBuffer send(bytes), recv(bytes);
      GuardedBuffer& in = k.inPlace ? recv : send;
      fillReductionInput(t, k.op, rank, n, in.data(), k.count, 0, k.salt);
      uint64_t sendHash = hashBytes(send.data(), bytes);
      void* recvPtr = recv.data();
      if (!k.inPlace && !isRoot && k.nullInsignificant) recvPtr = nullptr;
      RANK_CHECK_LANES(lanesReduce(in.data(), recvPtr, k.count, t, op.get(), k.root, comm, nullptr),
                       comm);
      if (isRoot) check(checkReductionOutput(t, k.op, n, recv.data(), k.count, 0, k.salt), "root");
      check(recv.checkGuards(), "recvbuff");
      if (!k.inPlace) checkUnchanged(send, sendHash);
      break;
    }
    case Collective::ReduceScatter: {
      RedOp op(k.op, t, comm);
      GuardedBuffer send(bytes * n), recv(bytes);
      fillReductionInput(t, k.op, rank, n, send.data(), k.count * n, 0, k.salt);
      uint64_t sendHash = hashBytes(send.data(), send.bytes());
      std::byte* out = k.inPlace ? send.data() + rank * bytes : recv.data();
      RANK_CHECK_LANES(lanesReduceScatter(send.data(), out, k.count, t, op.get(), comm, nullptr),
                       comm);
      check(checkReductionOutput(t, k.op, n, out, k.count, rank * k.count, k.salt), "own block");
      check(send.checkGuards(), "sendbuff");
      check(recv.checkGuards(), "recvbuff");
      if (!k.inPlace) checkUnchanged(send, sendHash);
      break;
    }
    case Collective::Broadcast: {
      GuardedBuffer send(bytes), recv(bytes);
      GuardedBuffer& in = k.inPlace ? recv : send;
      if (isRoot) fillPattern(in.data(), bytes, k.root, kBroadcastDst, k.salt);
      uint64_t sendHash = hashBytes(send.data(), bytes);
      const void* sendPtr = in.data();
      if (!k.inPlace && !isRoot && k.nullInsignificant) sendPtr = nullptr;
      RANK_CHECK_LANES(lanesBroadcast(sendPtr, recv.data(), k.count, t, k.root, comm, nullptr),
                       comm);
      check(checkPattern(recv.data(), bytes, k.root, kBroadcastDst, k.salt), "recvbuff");
      check(recv.checkGuards(), "recvbuff");
      if (!k.inPlace) checkUnchanged(send, sendHash);
      break;
    }
    case Collective::AllGather: {
      GuardedBuffer send(bytes), recv(bytes * n);
      std::byte* in = k.inPlace ? recv.data() + rank * bytes : send.data();
      fillPattern(in, bytes, rank, kBroadcastDst, k.salt);
      uint64_t sendHash = hashBytes(send.data(), bytes);
      RANK_CHECK_LANES(lanesAllGather(in, recv.data(), k.count, t, comm, nullptr), comm);
      for (int r = 0; r < n; ++r)
        check(checkPattern(recv.data() + r * bytes, bytes, r, kBroadcastDst, k.salt),
              strprintf("block of rank %d", r).c_str());
      check(recv.checkGuards(), "recvbuff");
      if (!k.inPlace) checkUnchanged(send, sendHash);
      break;
    }
    case Collective::AlltoAll: {
      GuardedBuffer send(bytes * n), recv(bytes * n);
      for (int p = 0; p < n; ++p) fillPattern(send.data() + p * bytes, bytes, rank, p, k.salt);
      uint64_t sendHash = hashBytes(send.data(), send.bytes());
      RANK_CHECK_LANES(lanesAlltoAll(send.data(), recv.data(), k.count, t, comm, nullptr), comm);
      for (int p = 0; p < n; ++p)
        check(checkPattern(recv.data() + p * bytes, bytes, p, rank, k.salt),
              strprintf("block from rank %d", p).c_str());
      check(recv.checkGuards(), "recvbuff");
      checkUnchanged(send, sendHash);
      break;
    }
    case Collective::Gather: {
      GuardedBuffer send(bytes), recv(bytes * n);
      std::byte* in = (k.inPlace && isRoot) ? recv.data() + rank * bytes : send.data();
      fillPattern(in, bytes, rank, kBroadcastDst, k.salt);
      uint64_t sendHash = hashBytes(send.data(), bytes);
      void* recvPtr = recv.data();
      if (!isRoot && k.nullInsignificant && !k.inPlace) recvPtr = nullptr;
      RANK_CHECK_LANES(lanesGather(in, recvPtr, k.count, t, k.root, comm, nullptr), comm);
      if (isRoot) {
        for (int r = 0; r < n; ++r)
          check(checkPattern(recv.data() + r * bytes, bytes, r, kBroadcastDst, k.salt),
                strprintf("root's block of rank %d", r).c_str());
      }
      check(recv.checkGuards(), "recvbuff");
      if (in == send.data()) checkUnchanged(send, sendHash);
      break;
    }
    case Collective::Scatter: {
      GuardedBuffer send(bytes * n), recv(bytes);
      if (isRoot)
        for (int p = 0; p < n; ++p) fillPattern(send.data() + p * bytes, bytes, rank, p, k.salt);
      uint64_t sendHash = hashBytes(send.data(), send.bytes());
      std::byte* out = (k.inPlace && isRoot) ? send.data() + rank * bytes : recv.data();
      const void* sendPtr = send.data();
      if (!isRoot && k.nullInsignificant && !k.inPlace) sendPtr = nullptr;
      RANK_CHECK_LANES(lanesScatter(sendPtr, out, k.count, t, k.root, comm, nullptr), comm);
      check(checkPattern(out, bytes, k.root, rank, k.salt), "recvbuff");
      check(recv.checkGuards(), "recvbuff");
      check(send.checkGuards(), "sendbuff");
      if (out == recv.data()) checkUnchanged(send, sendHash);
      break;
    }
    case Collective::SendRecvRing: {
      const int next = (rank + 1) % n;
      const int prev = (rank + n - 1) % n;
      GuardedBuffer send(bytes), recv(bytes);
      fillPattern(send.data(), bytes, rank, next, k.salt);
      GuardedBuffer& in = k.inPlace ? send : recv;
      RANK_CHECK_LANES(lanesGroupStart(), comm);
      RANK_CHECK_LANES(lanesSend(send.data(), k.count, t, next, comm, nullptr), comm);
      RANK_CHECK_LANES(lanesRecv(in.data(), k.count, t, prev, comm, nullptr), comm);
      RANK_CHECK_LANES(lanesGroupEnd(), comm);
      check(checkPattern(in.data(), bytes, prev, rank, k.salt), "recvbuff");
      check(in.checkGuards(), "recvbuff");
      break;
    }
  }
}

// Every rank must hold bit-identical all-reduce outputs: the hashes go
// through an all-gather (checked against the library's own transport, but a
// divergent reduction order would still show as differing hashes).
void checkIdenticalOutputs(const std::vector<uint64_t>& hashes, const std::vector<Combo>& combos,
                           Collective c, int rank, int n, lanesComm_t comm) {
  const size_t m = hashes.size();
  std::vector<uint64_t> all(m * n);
  RANK_CHECK_LANES(lanesAllGather(hashes.data(), all.data(), m, lanesUint64, comm, nullptr), comm);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < m; ++i)
      RANK_CHECK(all[r * m + i] == hashes[i],
                 "%s: rank %d's output differs from rank %d's (not bit-identical)",
                 comboName(c, combos[i]).c_str(), r, rank);
}

using MatrixParam = std::tuple<Collective, int, RankMode>;

class CollectiveMatrix : public ::testing::TestWithParam<MatrixParam> {};

TEST_P(CollectiveMatrix, HostBuffers) {
  const auto [collParam, nranks, mode] = GetParam();
  runRanks(mode, nranks, [coll = collParam](int rank, int n, const lanesUniqueId& id) {
    CommGuard comm(initComm(rank, n, id));
    const std::vector<Combo> combos = planCombos(coll, n);
    std::vector<uint64_t> hashes;
    for (const Combo& k : combos) runCombo(coll, k, rank, n, comm.get(), &hashes);
    if (coll == Collective::AllReduce)
      checkIdenticalOutputs(hashes, combos, coll, rank, n, comm.get());
  });
}

std::string matrixName(const ::testing::TestParamInfo<MatrixParam>& info) {
  return strprintf("%s_%dranks", collectiveName(std::get<0>(info.param)), std::get<1>(info.param));
}

const auto kCollectives =
    ::testing::Values(Collective::AllReduce, Collective::Broadcast, Collective::Reduce,
                      Collective::AllGather, Collective::ReduceScatter, Collective::AlltoAll,
                      Collective::Gather, Collective::Scatter, Collective::SendRecvRing);

INSTANTIATE_TEST_SUITE_P(Procs, CollectiveMatrix,
                         ::testing::Combine(kCollectives, ::testing::Values(1, 2, 3, 4, 7, 8),
                                            ::testing::Values(RankMode::Process)),
                         matrixName);
INSTANTIATE_TEST_SUITE_P(Threads, CollectiveMatrix,
                         ::testing::Combine(kCollectives, ::testing::Values(2, 3),
                                            ::testing::Values(RankMode::Thread)),
                         matrixName);

// The test's own references must be exact where they claim to be: every
// expected value (and the inputs) must survive a round trip through the type.
TEST(TestData, ExpectedValuesAreRepresentable) {
  for (lanesDataType_t t : kAllTypes)
    for (Reduction r : kAllReductions)
      for (int n : {1, 2, 3, 7, 8})
        for (size_t i = 0; i < 2000; ++i) {
          std::byte cell[8];
          double x = reductionInput(t, r, n - 1, n, i, 5);
          storeElement(t, cell, 0, x);
          ASSERT_EQ(loadElement(t, cell, 0), x) << typeName(t) << " " << reductionName(r);
          double e = reductionExpected(t, r, n, i, 5);
          storeElement(t, cell, 0, e);
          ASSERT_EQ(loadElement(t, cell, 0), e)
              << typeName(t) << " " << reductionName(r) << " n=" << n << " i=" << i;
        }
}

// The checkers must see a single wrong element or byte.
TEST(TestData, CheckersCatchOneWrongElement) {
  for (lanesDataType_t t : kAllTypes) {
    for (Reduction r : kAllReductions) {
      constexpr size_t kCount = 257;
      GuardedBuffer out(kCount * typeSize(t));
      for (size_t i = 0; i < kCount; ++i)
        storeElement(t, out.data(), i, reductionExpected(t, r, 4, 100 + i, 9));
      EXPECT_EQ(checkReductionOutput(t, r, 4, out.data(), kCount, 100, 9), "")
          << typeName(t) << " " << reductionName(r);
      double e = reductionExpected(t, r, 4, 100 + 200, 9);
      storeElement(t, out.data(), 200, e == 1 ? 2 : 1);
      EXPECT_NE(checkReductionOutput(t, r, 4, out.data(), kCount, 100, 9), "")
          << typeName(t) << " " << reductionName(r);
    }
  }
  GuardedBuffer bytes(1000);
  fillPattern(bytes.data(), 1000, 3, 1, 7);
  EXPECT_EQ(checkPattern(bytes.data(), 1000, 3, 1, 7), "");
  EXPECT_NE(checkPattern(bytes.data(), 1000, 1, 3, 7), "") << "source and destination swapped";
  bytes.data()[999] ^= std::byte{1};
  EXPECT_NE(checkPattern(bytes.data(), 1000, 3, 1, 7), "");
  bytes.data()[1000] = std::byte{0};  // one past the end
  EXPECT_NE(bytes.checkGuards(), "");
}

TEST(TestData, CodecMatchesKnownEncodings) {
  EXPECT_EQ(encodeHalf(1.0), 0x3C00);
  EXPECT_EQ(encodeHalf(-2.0), 0xC000);
  EXPECT_EQ(encodeHalf(65504.0), 0x7BFF);
  EXPECT_EQ(encodeBfloat16(1.0), 0x3F80);
  EXPECT_EQ(encodeBfloat16(-3.0), 0xC040);
  EXPECT_EQ(encodeE4m3(1.0), 0x38);
  EXPECT_EQ(encodeE4m3(448.0), 0x7E);
  EXPECT_EQ(encodeE4m3(-16.0), 0xD8);
  EXPECT_EQ(encodeE5m2(1.0), 0x3C);
  EXPECT_EQ(encodeE5m2(8.0), 0x48);
  EXPECT_EQ(encodeE5m2(57344.0), 0x7B);
  for (unsigned b = 0; b < 256; ++b) {
    double v4 = decodeE4m3(static_cast<uint8_t>(b));
    if (!std::isnan(v4)) {
      EXPECT_EQ(encodeE4m3(v4), b) << "e4m3 bits " << b;
    }
    double v5 = decodeE5m2(static_cast<uint8_t>(b));
    if (!std::isnan(v5)) {
      EXPECT_EQ(encodeE5m2(v5), b) << "e5m2 bits " << b;
    }
  }
  for (unsigned b = 0; b < 65536; b += 7) {
    double h = decodeHalf(static_cast<uint16_t>(b));
    if (!std::isnan(h)) {
      EXPECT_EQ(encodeHalf(h), b) << "half bits " << b;
    }
    double f = decodeBfloat16(static_cast<uint16_t>(b));
    if (!std::isnan(f)) {
      EXPECT_EQ(encodeBfloat16(f), b) << "bf16 bits " << b;
    }
  }
}

// An anonymous mapping for multi-GiB buffers (untouched pages cost nothing).
class Mapping {
 public:
  explicit Mapping(size_t bytes) : bytes_(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    RANK_CHECK(p != MAP_FAILED, "mmap of %zu bytes: %s", bytes, std::strerror(errno));
    data_ = static_cast<int8_t*>(p);
  }
  ~Mapping() { munmap(data_, bytes_); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  int8_t* data() const { return data_; }

 private:
  int8_t* data_ = nullptr;
  size_t bytes_;
};

// Rank r's int8 input at i: periodic with a rank-specific period, so the sum
// pattern only repeats every 253*251 elements.
int8_t largeInput(int rank, size_t i) {
  return rank == 0 ? static_cast<int8_t>(static_cast<int>(i % 253 % 11) - 5)
                   : static_cast<int8_t>(static_cast<int>(i % 251 % 7) - 3);
}

// Counts past 2^31 elements must not be truncated anywhere (int overflow in
// chunking or offsets). 2 GiB+ per buffer: allow minutes on a slow machine.
constexpr size_t kLargeCount = (size_t{1} << 31) + 5;

TEST(LargeCount, Int8AllReduceBeyond2To31) {
  RunOptions options;
  options.watchdogSeconds = 280;
  options.env = {{"LANES_TIMEOUT", "240"}};
  runForked(
      2,
      [](int rank, int n, const lanesUniqueId& id) {
        CommGuard comm(initComm(rank, n, id));
        Mapping send(kLargeCount), recv(kLargeCount);
        // Fill by tiling one period (fast), then mark recv so untouched bytes show.
        const size_t period = rank == 0 ? 253 : 251;
        const size_t tile = period * 4096;
        for (size_t i = 0; i < std::min(tile, kLargeCount); ++i)
          send.data()[i] = largeInput(rank, i);
        for (size_t off = tile; off < kLargeCount; off += tile)
          std::memcpy(send.data() + off, send.data(), std::min(tile, kLargeCount - off));
        std::memset(recv.data(), 0x7f, kLargeCount);
        RANK_CHECK_LANES(lanesAllReduce(send.data(), recv.data(), kLargeCount, lanesInt8, lanesSum,
                                        comm.get(), nullptr),
                         comm.get());
        auto expectAt = [&](size_t i) {
          int expected = largeInput(0, i) + largeInput(1, i);
          RANK_CHECK(recv.data()[i] == expected, "element %zu: got %d, expected %d", i,
                     recv.data()[i], expected);
        };
        for (size_t i = 0; i < kLargeCount; i += 4093) expectAt(i);
        for (size_t i = kLargeCount - 65536; i < kLargeCount; ++i) expectAt(i);  // the tail
        for (size_t i = (size_t{1} << 31) - 4096; i < (size_t{1} << 31) + 5; ++i) expectAt(i);
        for (size_t i = 0; i < 65536; ++i) expectAt(i);
      },
      options);
}

}  // namespace
}  // namespace lanes::test
