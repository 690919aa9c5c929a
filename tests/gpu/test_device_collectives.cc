// The collective matrix on device buffers, ranks sharing GPU 0: every
// collective x datatype x reduction x in-place/out-of-place x count, on
// 1..8 ranks as threads and on 2 and 4 forked ranks (a subset). One
// communicator per run; every rank checks its own results against the test's
// own arithmetic (tests/multi/data.h), and all-reduce outputs must be
// bit-identical on every rank.
//
// Then stream semantics: a kernel writes the input before the collective and
// a kernel checks the output after it with no host synchronisation between,
// while a gate kernel holds the stream until the calls have returned (so a
// call that blocks on its stream is caught); groups over two streams; calls
// on two streams of one communicator; zero-count calls inside a device group.
#include <gtest/gtest.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/comm.h"
#include "exec/cuda/ll_allreduce.h"
#include "tests/common/scoped_env.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/gpu/gpu_kernels.h"
#include "tests/gpu/mps_daemon.h"
#include "tests/multi/data.h"

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
constexpr Collective kAllCollectives[] = {
    Collective::AllReduce, Collective::Broadcast,     Collective::Reduce,
    Collective::AllGather, Collective::ReduceScatter, Collective::AlltoAll,
    Collective::Gather,    Collective::Scatter,       Collective::SendRecvRing};

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

bool isReduction(Collective c) {
  return c == Collective::AllReduce || c == Collective::Reduce || c == Collective::ReduceScatter;
}

bool hasInPlace(Collective c) { return c != Collective::AlltoAll && c != Collective::SendRecvRing; }

struct Combo {
  lanesDataType_t type;
  Reduction op;
  size_t count;
  bool inPlace;
  int root;
  uint32_t salt;
  bool nullInsignificant;  // out-of-place: NULL for buffers NCCL calls insignificant
  bool deviceScalar;       // PreMulSum: scalar in device memory (lanesScalarDevice)
};

std::string comboName(Collective c, const Combo& k) {
  std::string s = strprintf("%s %s", collectiveName(c), typeName(k.type));
  if (isReduction(c)) s += strprintf(" %s", reductionName(k.op));
  if (isReduction(c) && k.op == Reduction::PreMulSum)
    s += k.deviceScalar ? " (device scalar)" : " (host scalar)";
  s += strprintf(" count=%zu %s root=%d", k.count, k.inPlace ? "in-place" : "out-of-place", k.root);
  return s;
}

constexpr size_t kBigCount = (size_t{1} << 20) + 3;  // "1 MiB + 3" elements

enum class Sample { Threads, Processes };

// Threads: every (type, op) pair in both buffer modes at 7 and 4097
// elements, counts 0 and 1 for every type, 1 MiB+3 for a third of the types
// (which third depends on nranks, so the rank counts together cover all).
// Processes: every type once or twice, ops rotating, one or two big ones.
// LANES_TEST_FULL=1: the whole cross product.
std::vector<Combo> planCombos(Collective c, int n, Sample sample) {
  std::vector<Combo> out;
  auto add = [&](lanesDataType_t t, Reduction op, size_t count, bool inPlace) {
    if (!hasInPlace(c)) inPlace = false;
    int i = static_cast<int>(out.size());
    out.push_back(Combo{t, op, count, inPlace, (i * 5 + 1) % n,
                        static_cast<uint32_t>(i * 7919 + 31 * n + 17), i % 2 == 1,
                        (i / 2) % 2 == 1});
  };
  const std::vector<Reduction> ops =
      isReduction(c) ? std::vector<Reduction>(std::begin(kAllReductions), std::end(kAllReductions))
                     : std::vector<Reduction>{Reduction::Sum};
  const int nops = static_cast<int>(ops.size());
  const int ntypes = static_cast<int>(std::size(kAllTypes));
  if (fullMatrix()) {
    for (lanesDataType_t t : kAllTypes)
      for (Reduction op : ops)
        for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{4097}, kBigCount})
          for (bool inPlace : {false, true}) {
            if (inPlace && !hasInPlace(c)) continue;
            add(t, op, count, inPlace);
          }
    return out;
  }
  for (int ti = 0; ti < ntypes; ++ti) {
    const lanesDataType_t t = kAllTypes[ti];
    if (sample == Sample::Threads) {
      for (int oi = 0; oi < nops; ++oi) {
        const bool a = (ti + oi + n) % 2 == 0;
        add(t, ops[oi], (ti + oi) % 2 == 0 ? 7 : 4097, a);
        add(t, ops[oi], (ti + oi) % 2 == 0 ? 4097 : 7, !a);
      }
      add(t, ops[(ti + n) % nops], 0, ti % 2 == 0);
      add(t, ops[(ti + n + 1) % nops], 1, ti % 2 == 1);
      if ((ti + n) % 3 == 0) add(t, ops[(ti + n) % nops], kBigCount, (ti / 3) % 2 == 0);
    } else {
      add(t, ops[(ti + n) % nops], 4097, ti % 2 == 0);
      add(t, ops[(ti + n + 3) % nops], 7, ti % 2 == 1);
      if (ti % 4 == n % 4) add(t, ops[(ti + 1) % nops], ti % 8 < 4 ? 0 : 1, ti % 2 == 0);
      if ((ti + n) % 6 == 0) add(t, ops[ti % nops], kBigCount, ti % 2 == 1);
    }
  }
  return out;
}

// A reduction op for one call; PreMulSum ops are created on the communicator
// (scalar 2, in host or device memory) and destroyed after the call.
class OpHandle {
 public:
  OpHandle(const Combo& k, GpuRank& self) : comm_(self.comm) {
    switch (k.op) {
      case Reduction::Sum:
        op_ = lanesSum;
        return;
      case Reduction::Prod:
        op_ = lanesProd;
        return;
      case Reduction::Max:
        op_ = lanesMax;
        return;
      case Reduction::Min:
        op_ = lanesMin;
        return;
      case Reduction::Avg:
        op_ = lanesAvg;
        return;
      case Reduction::PreMulSum:
        break;
    }
    std::vector<std::byte> scalar = scalarBytes(k.type, kPreMulScalar);
    void* where = scalar.data();
    lanesScalarResidence_t residence = lanesScalarHostImmediate;
    if (k.deviceScalar) {
      deviceScalar_ = std::make_unique<DeviceBuffer>(scalar.size(), self.stream);
      deviceScalar_->upload(scalar.data(), scalar.size());
      syncStream(self.stream);  // the value is in place before the op reads it
      where = deviceScalar_->data();
      residence = lanesScalarDevice;
    }
    GPU_CHECK_LANES(lanesRedOpCreatePreMulSum(&op_, where, k.type, residence, comm_), comm_);
    created_ = true;
  }
  ~OpHandle() {
    if (created_) lanesRedOpDestroy(op_, comm_);
  }
  OpHandle(const OpHandle&) = delete;
  OpHandle& operator=(const OpHandle&) = delete;
  lanesRedOp_t get() const { return op_; }

 private:
  lanesComm_t comm_;
  lanesRedOp_t op_ = lanesSum;
  bool created_ = false;
  std::unique_ptr<DeviceBuffer> deviceScalar_;
};

constexpr int kBroadcastDst = 0xffff;  // pattern "destination" for one-to-all data
constexpr uint8_t kStale = 0xEE;       // what a receive buffer holds before the call

// Runs one combination on this rank and checks this rank's result. For
// all-reduce, appends the hash of the output to *hashes.
void runCombo(Collective c, const Combo& k, GpuRank& self, std::vector<uint64_t>* hashes) {
  const std::string name = comboName(c, k);
  const int rank = self.rank;
  const int n = self.nranks;
  lanesComm_t comm = self.comm;
  cudaStream_t st = self.stream;
  const lanesDataType_t t = k.type;
  const size_t bytes = k.count * typeSize(t);
  const bool isRoot = rank == k.root;
  auto check = [&](const std::string& problem, const char* what) {
    GPU_CHECK(problem.empty(), "%s: %s: %s", name.c_str(), what, problem.c_str());
  };
  // The output, with its guard zones checked.
  auto result = [&](const DeviceBuffer& buf, const char* what) {
    std::string guards;
    std::vector<std::byte> out = buf.download(&guards);
    check(guards, what);
    return out;
  };
  auto checkUnchanged = [&](const DeviceBuffer& buf, const std::vector<std::byte>& before) {
    std::vector<std::byte> now = result(buf, "sendbuff");
    GPU_CHECK(now == before, "%s: the library modified the out-of-place sendbuff", name.c_str());
  };

  switch (c) {
    case Collective::AllReduce: {
      OpHandle op(k, self);
      DeviceBuffer send(bytes, st), recv(bytes, st);
      std::vector<std::byte> input(bytes);
      fillReductionInput(t, k.op, rank, n, input.data(), k.count, 0, k.salt);
      recv.fill(kStale);
      DeviceBuffer& in = k.inPlace ? recv : send;
      in.upload(input.data(), bytes);
      GPU_CHECK_LANES(lanesAllReduce(in.data(), recv.data(), k.count, t, op.get(), comm, st), comm);
      std::vector<std::byte> out = result(recv, "recvbuff");
      check(checkReductionOutput(t, k.op, n, out.data(), k.count, 0, k.salt), "recvbuff");
      if (!k.inPlace) checkUnchanged(send, input);
      hashes->push_back(hashBytes(out.data(), bytes));
      break;
    }
    case Collective::Reduce: {
      OpHandle op(k, self);
      DeviceBuffer send(bytes, st), recv(bytes, st);
      std::vector<std::byte> input(bytes);
      fillReductionInput(t, k.op, rank, n, input.data(), k.count, 0, k.salt);
      recv.fill(kStale);
      DeviceBuffer& in = k.inPlace ? recv : send;
      in.upload(input.data(), bytes);
      void* recvPtr = recv.data();
      if (!k.inPlace && !isRoot && k.nullInsignificant) recvPtr = nullptr;
      GPU_CHECK_LANES(lanesReduce(in.data(), recvPtr, k.count, t, op.get(), k.root, comm, st),
                      comm);
      std::vector<std::byte> out = result(recv, "recvbuff");
      if (isRoot) check(checkReductionOutput(t, k.op, n, out.data(), k.count, 0, k.salt), "root");
      if (!k.inPlace) checkUnchanged(send, input);
      break;
    }
    case Collective::ReduceScatter: {
      OpHandle op(k, self);
      DeviceBuffer send(bytes * n, st), recv(bytes, st);
      std::vector<std::byte> input(bytes * n);
      fillReductionInput(t, k.op, rank, n, input.data(), k.count * n, 0, k.salt);
      send.upload(input.data(), input.size());
      recv.fill(kStale);
      std::byte* out = k.inPlace ? send.data() + rank * bytes : recv.data();
      GPU_CHECK_LANES(lanesReduceScatter(send.data(), out, k.count, t, op.get(), comm, st), comm);
      std::vector<std::byte> sendNow = result(send, "sendbuff");
      std::vector<std::byte> recvNow = result(recv, "recvbuff");
      const std::byte* got = k.inPlace ? sendNow.data() + rank * bytes : recvNow.data();
      check(checkReductionOutput(t, k.op, n, got, k.count, rank * k.count, k.salt), "own block");
      if (!k.inPlace) GPU_CHECK(sendNow == input, "%s: sendbuff modified", name.c_str());
      break;
    }
    case Collective::Broadcast: {
      DeviceBuffer send(bytes, st), recv(bytes, st);
      std::vector<std::byte> input(bytes);
      fillPattern(input.data(), bytes, k.root, kBroadcastDst, k.salt);
      recv.fill(kStale);
      DeviceBuffer& in = k.inPlace ? recv : send;
      if (isRoot) in.upload(input.data(), bytes);
      const void* sendPtr = in.data();
      if (!k.inPlace && !isRoot && k.nullInsignificant) sendPtr = nullptr;
      GPU_CHECK_LANES(lanesBroadcast(sendPtr, recv.data(), k.count, t, k.root, comm, st), comm);
      std::vector<std::byte> out = result(recv, "recvbuff");
      check(checkPattern(out.data(), bytes, k.root, kBroadcastDst, k.salt), "recvbuff");
      if (!k.inPlace && isRoot) checkUnchanged(send, input);
      break;
    }
    case Collective::AllGather: {
      DeviceBuffer send(bytes, st), recv(bytes * n, st);
      std::vector<std::byte> input(bytes);
      fillPattern(input.data(), bytes, rank, kBroadcastDst, k.salt);
      recv.fill(kStale);
      if (k.inPlace) {
        recv.upload(input.data(), bytes, rank * bytes);
      } else {
        send.upload(input.data(), bytes);
      }
      std::byte* in = k.inPlace ? recv.data() + rank * bytes : send.data();
      GPU_CHECK_LANES(lanesAllGather(in, recv.data(), k.count, t, comm, st), comm);
      std::vector<std::byte> out = result(recv, "recvbuff");
      for (int r = 0; r < n; ++r)
        check(checkPattern(out.data() + r * bytes, bytes, r, kBroadcastDst, k.salt),
              strprintf("block of rank %d", r).c_str());
      if (!k.inPlace) checkUnchanged(send, input);
      break;
    }
    case Collective::AlltoAll: {
      DeviceBuffer send(bytes * n, st), recv(bytes * n, st);
      std::vector<std::byte> input(bytes * n);
      for (int p = 0; p < n; ++p) fillPattern(input.data() + p * bytes, bytes, rank, p, k.salt);
      send.upload(input.data(), input.size());
      recv.fill(kStale);
      GPU_CHECK_LANES(lanesAlltoAll(send.data(), recv.data(), k.count, t, comm, st), comm);
      std::vector<std::byte> out = result(recv, "recvbuff");
      for (int p = 0; p < n; ++p)
        check(checkPattern(out.data() + p * bytes, bytes, p, rank, k.salt),
              strprintf("block from rank %d", p).c_str());
      checkUnchanged(send, input);
      break;
    }
    case Collective::Gather: {
      DeviceBuffer send(bytes, st), recv(bytes * n, st);
      std::vector<std::byte> input(bytes);
      fillPattern(input.data(), bytes, rank, kBroadcastDst, k.salt);
      recv.fill(kStale);
      const bool rootInPlace = k.inPlace && isRoot;
      if (rootInPlace) {
        recv.upload(input.data(), bytes, rank * bytes);
      } else {
        send.upload(input.data(), bytes);
      }
      std::byte* in = rootInPlace ? recv.data() + rank * bytes : send.data();
      void* recvPtr = recv.data();
      if (!isRoot && k.nullInsignificant && !k.inPlace) recvPtr = nullptr;
      GPU_CHECK_LANES(lanesGather(in, recvPtr, k.count, t, k.root, comm, st), comm);
      std::vector<std::byte> out = result(recv, "recvbuff");
      if (isRoot) {
        for (int r = 0; r < n; ++r)
          check(checkPattern(out.data() + r * bytes, bytes, r, kBroadcastDst, k.salt),
                strprintf("root's block of rank %d", r).c_str());
      }
      if (!rootInPlace) checkUnchanged(send, input);
      break;
    }
    case Collective::Scatter: {
      DeviceBuffer send(bytes * n, st), recv(bytes, st);
      std::vector<std::byte> input(bytes * n);
      for (int p = 0; p < n; ++p) fillPattern(input.data() + p * bytes, bytes, k.root, p, k.salt);
      if (isRoot) send.upload(input.data(), input.size());
      recv.fill(kStale);
      const bool rootInPlace = k.inPlace && isRoot;
      std::byte* out = rootInPlace ? send.data() + rank * bytes : recv.data();
      const void* sendPtr = send.data();
      if (!isRoot && k.nullInsignificant && !k.inPlace) sendPtr = nullptr;
      GPU_CHECK_LANES(lanesScatter(sendPtr, out, k.count, t, k.root, comm, st), comm);
      std::vector<std::byte> sendNow = result(send, "sendbuff");
      std::vector<std::byte> recvNow = result(recv, "recvbuff");
      const std::byte* got = rootInPlace ? sendNow.data() + rank * bytes : recvNow.data();
      check(checkPattern(got, bytes, k.root, rank, k.salt), "recvbuff");
      if (isRoot) GPU_CHECK(sendNow == input, "%s: root's sendbuff modified", name.c_str());
      break;
    }
    case Collective::SendRecvRing: {
      const int next = (rank + 1) % n;
      const int prev = (rank + n - 1) % n;
      DeviceBuffer send(bytes, st), recv(bytes, st);
      std::vector<std::byte> input(bytes);
      fillPattern(input.data(), bytes, rank, next, k.salt);
      send.upload(input.data(), bytes);
      recv.fill(kStale);
      GPU_CHECK_LANES(lanesGroupStart(), comm);
      GPU_CHECK_LANES(lanesSend(send.data(), k.count, t, next, comm, st), comm);
      GPU_CHECK_LANES(lanesRecv(recv.data(), k.count, t, prev, comm, st), comm);
      GPU_CHECK_LANES(lanesGroupEnd(), comm);
      std::vector<std::byte> out = result(recv, "recvbuff");
      check(checkPattern(out.data(), bytes, prev, rank, k.salt), "recvbuff");
      checkUnchanged(send, input);
      break;
    }
  }
}

// Every rank must hold bit-identical all-reduce outputs (Avg on floats is
// checked with a tolerance above, so only this catches ranks that round
// differently). The hashes travel by a device all-gather.
void checkIdenticalOutputs(const std::vector<uint64_t>& hashes, const std::vector<Combo>& combos,
                           GpuRank& self) {
  const size_t m = hashes.size();
  const size_t n = static_cast<size_t>(self.nranks);
  DeviceBuffer mine(m * sizeof(uint64_t), self.stream), all(m * n * sizeof(uint64_t), self.stream);
  mine.upload(hashes.data(), m * sizeof(uint64_t));
  GPU_CHECK_LANES(lanesAllGather(mine.data(), all.data(), m, lanesUint64, self.comm, self.stream),
                  self.comm);
  std::vector<std::byte> raw = all.download();
  std::vector<uint64_t> every(m * n);
  std::memcpy(every.data(), raw.data(), raw.size());
  for (size_t r = 0; r < n; ++r)
    for (size_t i = 0; i < m; ++i)
      GPU_CHECK(every[r * m + i] == hashes[i],
                "%s: rank %zu's output differs from rank %d's (not bit-identical)",
                comboName(Collective::AllReduce, combos[i]).c_str(), r, self.rank);
}

void runMatrix(GpuRank& self, Sample sample) {
  for (Collective c : kAllCollectives) {
    const std::vector<Combo> combos = planCombos(c, self.nranks, sample);
    std::vector<uint64_t> hashes;
    for (const Combo& k : combos) runCombo(c, k, self, &hashes);
    if (c == Collective::AllReduce) checkIdenticalOutputs(hashes, combos, self);
  }
}

TEST(DeviceMatrix, Threads1Rank) {
  GPU_SKIP_UNLESS_GPU_HERE();
  runGpuThreads(1, [](GpuRank& self) { runMatrix(self, Sample::Threads); });
}
TEST(DeviceMatrix, Threads2Ranks) {
  GPU_SKIP_UNLESS_GPU_HERE();
  runGpuThreads(2, [](GpuRank& self) { runMatrix(self, Sample::Threads); });
}
TEST(DeviceMatrix, Threads3Ranks) {
  GPU_SKIP_UNLESS_GPU_HERE();
  runGpuThreads(3, [](GpuRank& self) { runMatrix(self, Sample::Threads); });
}
TEST(DeviceMatrix, Threads4Ranks) {
  GPU_SKIP_UNLESS_GPU_HERE();
  runGpuThreads(4, [](GpuRank& self) { runMatrix(self, Sample::Threads); });
}
TEST(DeviceMatrix, Threads8Ranks) {
  GPU_SKIP_UNLESS_GPU_HERE();
  runGpuThreads(8, [](GpuRank& self) { runMatrix(self, Sample::Threads); });
}
TEST(DeviceMatrix, Procs2Ranks) {
  GPU_SKIP_UNLESS_GPU_FOR_FORK();
  runGpuProcesses(2, [](GpuRank& self) { runMatrix(self, Sample::Processes); });
}
TEST(DeviceMatrix, Procs4Ranks) {
  GPU_SKIP_UNLESS_GPU_FOR_FORK();
  runGpuProcesses(4, [](GpuRank& self) { runMatrix(self, Sample::Processes); });
}

// Eight processes of one GPU under MPS, the whole matrix on the paths chosen
// there. The H200's pool of hardware queues holds eight clients only with
// CUDA_DEVICE_MAX_CONNECTIONS at 8 or unset, which the daemon's scope sees to.
TEST(DeviceMatrix, Procs8RanksUnderMps) {
  GPU_SKIP_UNLESS_GPU_FOR_FORK();
  if (!test::MpsDaemon::available()) GTEST_SKIP() << "nvidia-cuda-mps-control is not on PATH";
  test::MpsDaemon mps;
  ASSERT_TRUE(mps.running()) << mps.error();
  runGpuProcesses(8, [](GpuRank& self) {
    runMatrix(self, Sample::Processes);
    // The small calls of every collective the LL kernel serves took it.
    const auto* ll = dynamic_cast<const LlAllReduce*>(self.comm->devicePaths.ll.get());
    for (CollType c : {CollType::AllReduce, CollType::AllGather, CollType::ReduceScatter,
                       CollType::Broadcast, CollType::Reduce})
      GPU_CHECK(ll != nullptr && ll->callsOf(c) > 0, "no %s took the LL kernel under MPS",
                collTypeName(c));
  });
}

// All-gather, broadcast and reduce-scatter on the host-staged path
// (LANES_STAGED_COLLECTIVES=1) at every size (LANES_SHARED_GPU_PROXY_BYTES=0:
// processes on one GPU would send the small ones to the proxy), with the
// larger sample; the children inherit the variables.
void runStagedCollectivesMatrix(int nranks) {
  ScopedEnv collectives("LANES_STAGED_COLLECTIVES", "1");
  ScopedEnv proxy("LANES_SHARED_GPU_PROXY_BYTES", "0");
  runGpuProcesses(nranks, [](GpuRank& self) { runMatrix(self, Sample::Threads); });
}
TEST(DeviceMatrix, Procs2RanksStagedCollectives) {
  GPU_SKIP_UNLESS_GPU_FOR_FORK();
  runStagedCollectivesMatrix(2);
}
TEST(DeviceMatrix, Procs3RanksStagedCollectives) {
  GPU_SKIP_UNLESS_GPU_FOR_FORK();
  runStagedCollectivesMatrix(3);
}

// ---- Stream semantics -------------------------------------------------------

// A stream the body creates (non-blocking), destroyed at scope exit.
class ExtraStream {
 public:
  ExtraStream() { GPU_CHECK_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~ExtraStream() {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  ExtraStream(const ExtraStream&) = delete;
  ExtraStream& operator=(const ExtraStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// A device check result: wrong-element count and first wrong index.
class SumChecker {
 public:
  explicit SumChecker(cudaStream_t stream) : counters_(2 * sizeof(unsigned long long), stream) {
    const unsigned long long init[2] = {0, ULLONG_MAX};
    counters_.upload(init, sizeof init);
  }
  // Enqueues the check of `got` == scale * sum over ranks of orderingInput(salt).
  void enqueue(cudaStream_t stream, const void* got, size_t count, int nranks, int salt,
               float scale) {
    auto* c = reinterpret_cast<unsigned long long*>(counters_.data());
    GPU_CHECK_CUDA(launchCheckOrderingSum(stream, static_cast<const float*>(got), count, nranks,
                                          salt, scale, c, c + 1));
  }
  // "" or what was wrong; synchronises the checker's stream.
  std::string problem(const char* what) const {
    std::vector<std::byte> raw = counters_.download();
    unsigned long long c[2];
    std::memcpy(c, raw.data(), sizeof c);
    if (c[0] == 0) return "";
    return strprintf("%s: %llu elements wrong, the first at index %llu", what, c[0], c[1]);
  }

 private:
  DeviceBuffer counters_;
};

// No host synchronisation between the kernel that writes the input, the
// collectives, and the kernels that read the outputs; the stream is held by a
// gate until every call returned. A chain: in -> all-reduce -> mid ->
// all-reduce -> out; after it a kernel overwrites `in` (the collective must
// have consumed it in stream order).
void streamOrdering(GpuRank& self) {
  Gate gate(self.stream);
  for (size_t count : {size_t{7}, kBigCount}) {
    const size_t bytes = count * sizeof(float);
    const int salt = static_cast<int>(count % 1000);
    DeviceBuffer in(bytes, self.stream), mid(bytes, self.stream), out(bytes, self.stream);
    SumChecker checkMid(self.stream), checkOut(self.stream);
    in.fill(0xFF);  // NaN: stale data never passes a check
    mid.fill(0xFF);
    out.fill(0xFF);
    syncStream(self.stream);

    gate.close();
    const auto closedAt = std::chrono::steady_clock::now();
    auto* inF = reinterpret_cast<float*>(in.data());
    GPU_CHECK_CUDA(launchFillOrdering(self.stream, inF, count, self.rank, salt, 1.0f));
    GPU_CHECK_LANES(lanesAllReduce(in.data(), mid.data(), count, lanesFloat32, lanesSum, self.comm,
                                   self.stream),
                    self.comm);
    GPU_CHECK_LANES(lanesAllReduce(mid.data(), out.data(), count, lanesFloat32, lanesSum, self.comm,
                                   self.stream),
                    self.comm);
    GPU_CHECK_CUDA(launchFillOrdering(self.stream, inF, count, self.rank, salt + 1, 1.0f));
    checkMid.enqueue(self.stream, mid.data(), count, self.nranks, salt, 1.0f);
    checkOut.enqueue(self.stream, out.data(), count, self.nranks, salt,
                     static_cast<float>(self.nranks));
    const double callsSeconds = secondsSince(closedAt);
    gate.open();
    const double openSeconds = secondsSince(closedAt) - callsSeconds;

    syncStream(self.stream);
    GPU_CHECK(!gate.timedOut(),
              "count %zu: the gate timed out; the calls after it took %.3f s and opening it "
              "%.3f s (a call that waited for its stream takes ~20 s)",
              count, callsSeconds, openSeconds);
    std::string p = checkMid.problem("first all-reduce (read by a kernel after it)");
    GPU_CHECK(p.empty(), "count %zu: %s", count, p.c_str());
    p = checkOut.problem("second all-reduce of the first's output");
    GPU_CHECK(p.empty(), "count %zu: %s", count, p.c_str());
  }
}

TEST(DeviceStreams, KernelsBeforeAndAfterWithoutHostSyncThreads) {
  GPU_SKIP_UNLESS_GPU_HERE();
  runGpuThreads(3, streamOrdering);
}

TEST(DeviceStreams, KernelsBeforeAndAfterWithoutHostSyncProcs) {
  GPU_SKIP_UNLESS_GPU_FOR_FORK();
  runGpuProcesses(2, streamOrdering);
}

// Two all-reduces in one group on two streams of one communicator: each runs
// after the work already on its own stream (stream B is gated, its input
// written behind the gate), and work enqueued later on either stream sees both
// results.
TEST(DeviceStreams, GroupOverTwoStreams) {
  GPU_SKIP_UNLESS_GPU_HERE();
  runGpuThreads(2, [](GpuRank& self) {
    ExtraStream other;
    cudaStream_t a = self.stream;
    cudaStream_t b = other.get();
    Gate gate(b);
    for (size_t count : {size_t{4097}, kBigCount}) {
      const size_t bytes = count * sizeof(float);
      DeviceBuffer inA(bytes, a), outA(bytes, a), inB(bytes, a), outB(bytes, a);
      SumChecker onA1(a), onA2(a), onB1(a), onB2(a);
      inA.fill(0xFF);
      inB.fill(0xFF);
      outA.fill(0xFF);
      outB.fill(0xFF);
      syncStream(a);  // buffers exist before stream b touches them

      GPU_CHECK_CUDA(
          launchFillOrdering(a, reinterpret_cast<float*>(inA.data()), count, self.rank, 3, 1.0f));
      gate.close();
      GPU_CHECK_CUDA(
          launchFillOrdering(b, reinterpret_cast<float*>(inB.data()), count, self.rank, 4, 1.0f));
      GPU_CHECK_LANES(lanesGroupStart(), self.comm);
      GPU_CHECK_LANES(
          lanesAllReduce(inA.data(), outA.data(), count, lanesFloat32, lanesSum, self.comm, a),
          self.comm);
      GPU_CHECK_LANES(
          lanesAllReduce(inB.data(), outB.data(), count, lanesFloat32, lanesSum, self.comm, b),
          self.comm);
      GPU_CHECK_LANES(lanesGroupEnd(), self.comm);
      onA1.enqueue(a, outA.data(), count, self.nranks, 3, 1.0f);
      onA2.enqueue(a, outB.data(), count, self.nranks, 4, 1.0f);
      onB1.enqueue(b, outA.data(), count, self.nranks, 3, 1.0f);
      onB2.enqueue(b, outB.data(), count, self.nranks, 4, 1.0f);
      gate.open();

      syncStream(b);
      syncStream(a);
      GPU_CHECK(!gate.timedOut(), "count %zu: lanesGroupEnd waited for stream B's earlier work",
                count);
      for (const auto& [checker, what] :
           {std::pair{&onA1, "stream A's all-reduce, read on stream A"},
            std::pair{&onA2, "stream B's all-reduce, read on stream A"},
            std::pair{&onB1, "stream A's all-reduce, read on stream B"},
            std::pair{&onB2, "stream B's all-reduce, read on stream B"}}) {
        std::string p = checker->problem(what);
        GPU_CHECK(p.empty(), "count %zu: %s", count, p.c_str());
      }
    }
  });
}

// Two separate all-reduces on two streams of one communicator, the first
// held behind a gate on its stream, the second free to run: each must reduce
// the input its own stream wrote before it (whatever order the library runs
// them in), and neither may hang.
TEST(DeviceStreams, SeparateCallsOnTwoStreams) {
  GPU_SKIP_UNLESS_GPU_HERE();
  runGpuThreads(2, [](GpuRank& self) {
    ExtraStream other;
    cudaStream_t a = self.stream;
    cudaStream_t b = other.get();
    Gate gate(a);
    const size_t count = 4097;
    const size_t bytes = count * sizeof(float);
    DeviceBuffer inA(bytes, a), outA(bytes, a), inB(bytes, a), outB(bytes, a);
    SumChecker onA(a), onB(a);
    inA.fill(0xFF);
    inB.fill(0xFF);
    outA.fill(0xFF);
    outB.fill(0xFF);
    syncStream(a);

    gate.close();
    GPU_CHECK_CUDA(
        launchFillOrdering(a, reinterpret_cast<float*>(inA.data()), count, self.rank, 5, 1.0f));
    GPU_CHECK_LANES(
        lanesAllReduce(inA.data(), outA.data(), count, lanesFloat32, lanesSum, self.comm, a),
        self.comm);
    GPU_CHECK_CUDA(
        launchFillOrdering(b, reinterpret_cast<float*>(inB.data()), count, self.rank, 6, 1.0f));
    GPU_CHECK_LANES(
        lanesAllReduce(inB.data(), outB.data(), count, lanesFloat32, lanesSum, self.comm, b),
        self.comm);
    onA.enqueue(a, outA.data(), count, self.nranks, 5, 1.0f);
    onB.enqueue(b, outB.data(), count, self.nranks, 6, 1.0f);
    // Give stream B every chance to get ahead of the gated stream A: a library
    // that lets B's call start A's batch would now run A's on stale input.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    gate.open();

    syncStream(a);
    syncStream(b);
    GPU_CHECK(!gate.timedOut(), "a Lanes call waited for the gated stream's earlier work");
    std::string p = onA.problem("all-reduce on the gated stream A");
    GPU_CHECK(p.empty(), "%s", p.c_str());
    p = onB.problem("all-reduce on stream B, issued after A's");
    GPU_CHECK(p.empty(), "%s", p.c_str());
  });
}

// Zero-count calls are no-ops wherever they appear (as in NCCL): inside a
// group of device calls they must not make the group a "mix" of host and
// device memory.
TEST(DeviceStreams, ZeroCountCallsInsideADeviceGroup) {
  GPU_SKIP_UNLESS_GPU_HERE();
  runGpuThreads(2, [](GpuRank& self) {
    const size_t count = 4097;
    const size_t bytes = count * sizeof(float);
    DeviceBuffer in(bytes, self.stream), out(bytes, self.stream);
    DeviceBuffer emptyIn(0, self.stream), emptyOut(0, self.stream);
    SumChecker checker(self.stream);
    out.fill(0xFF);
    GPU_CHECK_CUDA(launchFillOrdering(self.stream, reinterpret_cast<float*>(in.data()), count,
                                      self.rank, 9, 1.0f));
    GPU_CHECK_LANES(lanesGroupStart(), self.comm);
    GPU_CHECK_LANES(lanesAllReduce(emptyIn.data(), emptyOut.data(), 0, lanesFloat32, lanesSum,
                                   self.comm, self.stream),
                    self.comm);
    GPU_CHECK_LANES(lanesAllReduce(in.data(), out.data(), count, lanesFloat32, lanesSum, self.comm,
                                   self.stream),
                    self.comm);
    GPU_CHECK_LANES(
        lanesAllGather(emptyIn.data(), emptyOut.data(), 0, lanesFloat32, self.comm, self.stream),
        self.comm);
    GPU_CHECK_LANES(lanesGroupEnd(), self.comm);
    checker.enqueue(self.stream, out.data(), count, self.nranks, 9, 1.0f);
    std::string p = checker.problem("all-reduce grouped with zero-count calls");
    GPU_CHECK(p.empty(), "%s", p.c_str());
  });
}

// ---- One rank, in place ------------------------------------------------------
// The result already is the input, so nothing may go on the stream (NCCL
// returns at once too): a CUDA Graph captured around the call has no node.
// Out of place and PreMulSum (which scales) must still enqueue work.
size_t capturedNodes(GpuRank& self, const std::function<lanesResult_t()>& call) {
  GPU_CHECK_CUDA(cudaStreamBeginCapture(self.stream, cudaStreamCaptureModeThreadLocal));
  const lanesResult_t res = call();
  cudaGraph_t graph = nullptr;
  GPU_CHECK_CUDA(cudaStreamEndCapture(self.stream, &graph));
  GPU_CHECK_LANES(res, self.comm);
  size_t nodes = 0;
  GPU_CHECK_CUDA(cudaGraphGetNodes(graph, nullptr, &nodes));
  cudaGraphDestroy(graph);
  return nodes;
}

TEST(DeviceSingleRank, InPlaceEnqueuesNothing) {
  GPU_SKIP_UNLESS_GPU_HERE();
  runGpuThreads(1, [](GpuRank& self) {
    constexpr size_t kCount = 1000;
    DeviceBuffer a(kCount * sizeof(float), self.stream), b(kCount * sizeof(float), self.stream);
    std::vector<float> input(kCount);
    for (size_t i = 0; i < kCount; ++i) input[i] = static_cast<float>(i) * 0.5f;
    a.upload(input.data(), input.size() * sizeof(float));
    lanesComm_t comm = self.comm;
    cudaStream_t s = self.stream;
    for (lanesRedOp_t op : {lanesSum, lanesProd, lanesMax, lanesMin, lanesAvg}) {
      const size_t inPlace = capturedNodes(self, [&] {
        return lanesAllReduce(a.data(), a.data(), kCount, lanesFloat32, op, comm, s);
      });
      GPU_CHECK(inPlace == 0, "in-place all-reduce of one rank (op %d) captured %zu nodes", op,
                inPlace);
    }
    GPU_CHECK(
        capturedNodes(
            self,
            [&] { return lanesAllGather(a.data(), a.data(), kCount, lanesFloat32, comm, s); }) == 0,
        "in-place all-gather of one rank captured work");
    GPU_CHECK(capturedNodes(self,
                            [&] {
                              return lanesBroadcast(a.data(), a.data(), kCount, lanesFloat32, 0,
                                                    comm, s);
                            }) == 0,
              "in-place broadcast of one rank captured work");
    const size_t outOfPlace = capturedNodes(self, [&] {
      return lanesAllReduce(a.data(), b.data(), kCount, lanesFloat32, lanesSum, comm, s);
    });
    GPU_CHECK(outOfPlace > 0, "out-of-place all-reduce of one rank captured no work");
    float scalar = 3.0f;
    lanesRedOp_t premul;
    GPU_CHECK_LANES(
        lanesRedOpCreatePreMulSum(&premul, &scalar, lanesFloat32, lanesScalarHostImmediate, comm),
        comm);
    const size_t scaled = capturedNodes(self, [&] {
      return lanesAllReduce(a.data(), a.data(), kCount, lanesFloat32, premul, comm, s);
    });
    GPU_CHECK(scaled > 0, "in-place PreMulSum of one rank captured no work (it must scale)");
    // Eagerly: in place leaves the data as it was; PreMulSum scales it.
    GPU_CHECK_LANES(lanesAllReduce(a.data(), a.data(), kCount, lanesFloat32, lanesSum, comm, s),
                    comm);
    std::vector<std::byte> got = a.download();
    GPU_CHECK(std::memcmp(got.data(), input.data(), kCount * sizeof(float)) == 0,
              "in-place all-reduce of one rank changed the data");
    GPU_CHECK_LANES(lanesAllReduce(a.data(), a.data(), kCount, lanesFloat32, premul, comm, s),
                    comm);
    got = a.download();
    for (size_t i = 0; i < kCount; ++i) {
      float v = 0;
      std::memcpy(&v, got.data() + i * sizeof(float), sizeof(float));
      GPU_CHECK(v == input[i] * 3.0f, "PreMulSum in place: element %zu is %g, expected %g", i, v,
                input[i] * 3.0f);
    }
    lanesRedOpDestroy(premul, comm);
  });
}

}  // namespace
}  // namespace lanes::test
