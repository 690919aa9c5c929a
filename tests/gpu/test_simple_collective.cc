// Mid-size device collectives on the simple kernel (kernels/cuda/simple_collective.*,
// src/exec/cuda/simple_collective.cc): ranks as processes on GPU 0 under a
// private MPS daemon, LANES_PROTO=simple so every call takes it.
//  - the five collectives over datatypes and ops, one chunk (up to 64 KiB)
//    and several with a partial last one, odd counts and the 4 MiB limit, in place and
//    out of place, misaligned buffers, every root that differs; exact
//    results, nothing written outside the output, the same bits on every rank
//    (2, 3 and 8 ranks);
//  - calls back to back without host synchronisation, alone and alternating
//    with LL calls (the two kernels share the sequence number);
//  - CUDA Graph capture, replayed with new inputs, eager calls between;
//  - a peer that never calls: lanesTimeout within LANES_TIMEOUT, naming it.
// Skipped when no GPU is visible or nvidia-cuda-mps-control is missing.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/comm.h"
#include "exec/cuda/ll_allreduce.h"
#include "kernels/cuda/simple_collective.h"
#include "lanes/lanes.h"
#include "tests/common/scoped_env.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/gpu/mps_daemon.h"
#include "tests/multi/data.h"
#include "tests/multi/red_op.h"

namespace lanes {
namespace {

using test::DeviceBuffer;
using test::GpuRank;
using test::Reduction;
using test::ScopedEnv;
using test::strprintf;

constexpr size_t kMaxBytes = size_t{4} << 20;  // LANES_SIMPLE_MAX_BYTES' default
constexpr uint8_t kUntouched = 0xEE;

const LlAllReduce* llOf(lanesComm_t comm) {
  return dynamic_cast<const LlAllReduce*>(comm->devicePaths.ll.get());
}

#define SIMPLE_NEEDS_MPS()                                                                       \
  do {                                                                                           \
    GPU_SKIP_UNLESS_GPU_FOR_FORK();                                                              \
    if (!test::MpsDaemon::available()) GTEST_SKIP() << "nvidia-cuda-mps-control is not on PATH"; \
  } while (0)

// Runs `body` on `nranks` processes under a private MPS daemon, every call on the simple kernel.
void runUnderMps(int nranks, const test::GpuBody& body, const char* proto = "simple") {
  ScopedEnv protoEnv("LANES_PROTO", proto), max("LANES_SIMPLE_MAX_BYTES", std::nullopt);
  test::MpsDaemon mps;
  ASSERT_TRUE(mps.running()) << mps.error();
  test::runGpuProcesses(nranks, body);
}

// One collective call and what it is checked against.
struct Call {
  CollType coll = CollType::AllReduce;
  lanesDataType_t type = lanesFloat32;
  Reduction red = Reduction::Sum;
  size_t count = 0;  // per rank (an all-gather's or reduce-scatter's block)
  int root = 0;
  bool inPlace = false;
  size_t shift = 0;  // elements send and recv sit past their buffer's start (out of place)
};

std::string describe(const Call& c) {
  return strprintf("%s %s %s count %zu root %d%s%s", collTypeName(c.coll), test::typeName(c.type),
                   test::reductionName(c.red), c.count, c.root, c.inPlace ? " in place" : "",
                   c.shift != 0 ? " misaligned" : "");
}

// Issues `c` on the simple kernel and checks the output bytes, the input (out
// of place), and that nothing else was written; returns the output.
std::vector<std::byte> runCall(GpuRank& self, const Call& c, DeviceBuffer& send,
                               DeviceBuffer& recv) {
  const int n = self.nranks;
  const bool isRoot = self.rank == c.root;
  const size_t elem = test::typeSize(c.type);
  const size_t bytes = c.count * elem;
  const size_t ranks = static_cast<size_t>(n);
  const size_t inBytes = c.coll == CollType::ReduceScatter ? bytes * ranks : bytes;
  const size_t outBytes = c.coll == CollType::AllGather ? bytes * ranks : bytes;
  const bool moves = c.coll == CollType::AllGather || c.coll == CollType::Broadcast;
  const bool sends = c.coll != CollType::Broadcast || isRoot;
  const bool receives = c.coll != CollType::Reduce || isRoot;
  const uint32_t salt = static_cast<uint32_t>(c.count * 131 + static_cast<size_t>(c.coll) * 17 +
                                              static_cast<size_t>(c.red) * 7 + c.type);
  const std::string what = describe(c);

  std::vector<std::byte> input(inBytes);
  if (moves)
    test::fillPattern(input.data(), bytes, c.coll == CollType::Broadcast ? c.root : self.rank, 0,
                      salt);
  else
    test::fillReductionInput(c.type, c.red, self.rank, n, input.data(), inBytes / elem, 0, salt);
  send.fill(kUntouched);
  recv.fill(kUntouched);
  // In place the output is the input's buffer: an all-gather's input is this
  // rank's block of it, a reduce-scatter's output its block of the input.
  DeviceBuffer& out = c.inPlace ? send : recv;
  const size_t mine = bytes * static_cast<size_t>(self.rank);
  const size_t sendAt = c.inPlace && c.coll == CollType::AllGather ? mine : c.shift * elem;
  const size_t recvAt = !c.inPlace ? c.shift * elem : c.coll == CollType::ReduceScatter ? mine : 0;
  if (sends) send.upload(input.data(), inBytes, sendAt);
  const void* sendPtr = sends ? send.data() + sendAt : nullptr;
  void* recvPtr = receives ? out.data() + recvAt : nullptr;

  const LlAllReduce* ll = llOf(self.comm);
  const uint64_t before = ll != nullptr ? ll->simpleCallsOf(c.coll) : 0;
  test::RedOp op(c.red, c.type, self.comm);
  switch (c.coll) {
    case CollType::AllReduce:
      GPU_CHECK_LANES(
          lanesAllReduce(sendPtr, recvPtr, c.count, c.type, op.get(), self.comm, self.stream),
          self.comm);
      break;
    case CollType::AllGather:
      GPU_CHECK_LANES(lanesAllGather(sendPtr, recvPtr, c.count, c.type, self.comm, self.stream),
                      self.comm);
      break;
    case CollType::ReduceScatter:
      GPU_CHECK_LANES(
          lanesReduceScatter(sendPtr, recvPtr, c.count, c.type, op.get(), self.comm, self.stream),
          self.comm);
      break;
    case CollType::Broadcast:
      GPU_CHECK_LANES(
          lanesBroadcast(sendPtr, recvPtr, c.count, c.type, c.root, self.comm, self.stream),
          self.comm);
      break;
    default:
      GPU_CHECK_LANES(
          lanesReduce(sendPtr, recvPtr, c.count, c.type, op.get(), c.root, self.comm, self.stream),
          self.comm);
      break;
  }
  // One rank in place: nothing to do, nothing enqueued (as NCCL), PreMulSum aside.
  const bool noOp = n == 1 && sendPtr == recvPtr && (moves || c.red != Reduction::PreMulSum);
  GPU_CHECK(ll != nullptr && ll->simpleCallsOf(c.coll) == before + (noOp ? 0 : 1),
            "%s did not take the simple kernel", what.c_str());
  std::string guards;
  if (!c.inPlace && sends) {  // the input stays as it was
    std::vector<std::byte> in = send.download(&guards);
    GPU_CHECK(guards.empty() && std::memcmp(in.data() + sendAt, input.data(), inBytes) == 0,
              "%s: the send buffer changed %s", what.c_str(), guards.c_str());
  }
  if (!receives) return {};
  std::vector<std::byte> got = out.download(&guards);
  GPU_CHECK(guards.empty(), "%s: %s", what.c_str(), guards.c_str());
  const std::byte* result = got.data() + recvAt;
  std::string problem;
  if (c.coll == CollType::AllGather) {
    for (int q = 0; q < n && problem.empty(); ++q)
      problem = test::checkPattern(result + bytes * static_cast<size_t>(q), bytes, q, 0, salt);
  } else if (c.coll == CollType::Broadcast) {
    problem = test::checkPattern(result, bytes, c.root, 0, salt);
  } else {
    const size_t first = c.coll == CollType::ReduceScatter ? c.count * self.rank : 0;
    problem = test::checkReductionOutput(c.type, c.red, n, result, c.count, first, salt);
  }
  GPU_CHECK(problem.empty(), "%s: %s", what.c_str(), problem.c_str());
  for (size_t i = 0; i < got.size(); ++i) {
    if (i >= recvAt && i < recvAt + outBytes) continue;
    if (c.inPlace && i >= sendAt && i < sendAt + inBytes) continue;  // the rest of the input
    GPU_CHECK(got[i] == std::byte{kUntouched}, "%s: byte %zu outside the output was written",
              what.c_str(), i);
  }
  return {got.begin() + static_cast<ptrdiff_t>(recvAt),
          got.begin() + static_cast<ptrdiff_t>(recvAt + outBytes)};
}

constexpr CollType kCollectives[] = {CollType::AllReduce, CollType::AllGather,
                                     CollType::ReduceScatter, CollType::Broadcast,
                                     CollType::Reduce};

// The largest count of `c` whose posted bytes fit the slots (a reduce-scatter
// posts every block 16-byte aligned).
size_t limitCount(CollType c, lanesDataType_t t, int n) {
  const size_t elem = test::typeSize(t);
  if (c != CollType::ReduceScatter) return kMaxBytes / elem;
  return kMaxBytes / static_cast<size_t>(n) / cuda::kSimpleVectorBytes * cuda::kSimpleVectorBytes /
         elem;
}

// Buffers for every call of a test: the largest input or output (an
// all-gather's, in place in the send buffer) plus room for the misaligned shift.
struct Buffers {
  Buffers(GpuRank& self)
      : send(kMaxBytes * static_cast<size_t>(self.nranks) + 64, self.stream),
        recv(kMaxBytes * static_cast<size_t>(self.nranks) + 64, self.stream) {}
  DeviceBuffer send, recv;
};

// Every datatype with sum and the ops that round differently on a few, all-reduce
// in one chunk and in several, in place and misaligned; the other
// collectives on a type per width, every root that differs.
void runMatrix(GpuRank& self) {
  Buffers b(self);
  const int n = self.nranks;
  std::vector<std::vector<std::byte>> allReduces;
  for (const auto& [type, red] : test::reductionCases()) {
    const size_t elem = test::typeSize(type);
    for (size_t count : {size_t{7}, 4096 / elem + 1, (200 << 10) / elem + 3}) {
      for (bool inPlace : {false, true})
        allReduces.push_back(
            runCall(self, {CollType::AllReduce, type, red, count, 0, inPlace}, b.send, b.recv));
    }
    allReduces.push_back(
        runCall(self, {CollType::AllReduce, type, red, (64 << 10) / elem + 1, 0, false, 3}, b.send,
                b.recv));
  }
  const std::vector<std::pair<lanesDataType_t, Reduction>> few = {
      {lanesFloat32, Reduction::Sum}, {lanesBfloat16, Reduction::Avg},
      {lanesInt8, Reduction::Max},    {lanesFloat64, Reduction::PreMulSum},
      {lanesUint32, Reduction::Prod}, {lanesFloat16, Reduction::Min}};
  for (const auto& [type, red] : few) {
    const size_t elem = test::typeSize(type);
    for (CollType coll : kCollectives) {
      if (coll == CollType::AllReduce) continue;
      for (size_t count : {size_t{1}, 4096 / elem, 4096 / elem + 1, (300 << 10) / elem + 5}) {
        for (int root : {0, n - 1}) {
          const bool rooted = coll == CollType::Broadcast || coll == CollType::Reduce;
          if (!rooted && root != 0) continue;
          for (bool inPlace : {false, true})
            runCall(self, {coll, type, red, count, root, inPlace}, b.send, b.recv);
        }
      }
      runCall(self, {coll, type, red, (64 << 10) / elem + 1, 0, false, 5}, b.send, b.recv);
    }
  }
  // The slots' limit, and a byte-wise type (odd sizes everywhere).
  for (CollType coll : kCollectives) {
    for (bool inPlace : {false, true}) {
      runCall(
          self,
          {coll, lanesFloat32, Reduction::Sum, limitCount(coll, lanesFloat32, n), n - 1, inPlace},
          b.send, b.recv);
      runCall(self,
              {coll, lanesUint8, Reduction::Max, limitCount(coll, lanesUint8, n) - 7, 0, inPlace},
              b.send, b.recv);
    }
  }
  GPU_CHECK(llOf(self.comm)->simpleMaxBytes() == kMaxBytes,
            "simple slots of %zu bytes, expected %zu", llOf(self.comm)->simpleMaxBytes(),
            kMaxBytes);
  // The same bits on every rank: rank 0's all-reduce results travel to the others.
  std::vector<std::byte> flat;
  for (const auto& r : allReduces) flat.insert(flat.end(), r.begin(), r.end());
  DeviceBuffer theirs(flat.size(), self.stream);
  theirs.upload(flat.data(), flat.size());
  GPU_CHECK_LANES(lanesBroadcast(theirs.data(), theirs.data(), flat.size(), lanesUint8, 0,
                                 self.comm, self.stream),
                  self.comm);
  std::vector<std::byte> rank0 = theirs.download();
  GPU_CHECK(std::memcmp(rank0.data(), flat.data(), flat.size()) == 0,
            "rank %d's all-reduce results differ from rank 0's", self.rank);
}

TEST(SimpleProcesses, Matrix2RanksUnderMps) {
  SIMPLE_NEEDS_MPS();
  runUnderMps(2, runMatrix);
}
// One rank: the kernel copies (PreMulSum: scales) within the GPU.
TEST(SimpleProcesses, Matrix1Rank) {
  SIMPLE_NEEDS_MPS();
  runUnderMps(1, runMatrix);
}

// Fewer cases at more ranks: every collective just past one chunk and at the
// limit, the last rank as root.
void runRanks(GpuRank& self) {
  Buffers b(self);
  const int n = self.nranks;
  for (const auto& [type, red] :
       std::vector<std::pair<lanesDataType_t, Reduction>>{{lanesFloat32, Reduction::Sum},
                                                          {lanesBfloat16, Reduction::Avg},
                                                          {lanesInt8, Reduction::Max}}) {
    const size_t elem = test::typeSize(type);
    for (CollType coll : kCollectives) {
      const size_t limit = limitCount(coll, type, n);
      for (size_t count : {size_t{3}, (64 << 10) / elem + 1, limit / 3 + 1, limit}) {
        for (bool inPlace : {false, true})
          runCall(self, {coll, type, red, count, n - 1, inPlace}, b.send, b.recv);
      }
    }
  }
}

TEST(SimpleProcesses, Ranks3UnderMps) {
  SIMPLE_NEEDS_MPS();
  runUnderMps(3, runRanks);
}
TEST(SimpleProcesses, Ranks8UnderMps) {
  SIMPLE_NEEDS_MPS();
  runUnderMps(8, runRanks);
}

// 48 calls of 20 bytes and 1 MiB per rank in turn, the six kinds (all-reduce,
// broadcast, reduce, reduce-scatter, all-gather, all-reduce) and the roots
// rotating, every kind at both sizes, all enqueued before any result is read.
// With LL allowed the small ones take it and the two kernels alternate; with
// only the simple kernel allowed it serves all of them back to back. Slots
// are reused by sequence-number parity, which holds only if every call waits
// for a flag of every peer (a broadcast's non-roots read only the root's data).
void backToBack(GpuRank& self, bool withLl) {
  constexpr int kCalls = 48;
  constexpr size_t kSmall = 5, kLarge = size_t{1} << 18;  // int32 per rank
  const int n = self.nranks;
  const size_t ranks = static_cast<size_t>(n);
  auto countOf = [&](int k) { return k % 2 == (k / 6) % 2 ? kSmall : kLarge; };
  std::vector<size_t> at(kCalls + 1, 0);  // where call k's input and output start
  for (int k = 0; k < kCalls; ++k) at[k + 1] = at[k] + countOf(k) * ranks;
  auto input = [&](int r, size_t i) {
    return static_cast<int32_t>(i * 7 + static_cast<size_t>(r) * 1000 + 1);
  };
  std::vector<int32_t> in(at[kCalls]);
  for (size_t i = 0; i < in.size(); ++i) in[i] = input(self.rank, i);
  DeviceBuffer send(in.size() * 4, self.stream), recv(in.size() * 4, self.stream);
  send.upload(in.data(), in.size() * 4);
  recv.fill(kUntouched);
  auto* s = reinterpret_cast<int32_t*>(send.data());
  auto* r = reinterpret_cast<int32_t*>(recv.data());
  const LlAllReduce* ll = llOf(self.comm);
  GPU_CHECK(ll != nullptr && ll->simpleEnabled(), "the simple kernel is not set up");
  auto simpleCalls = [&] {
    uint64_t calls = 0;
    for (CollType c : kCollectives) calls += ll->simpleCallsOf(c);
    return calls;
  };
  const uint64_t simpleBefore = simpleCalls();
  const uint64_t llBefore = ll->callsOf(CollType::AllReduce);
  for (int k = 0; k < kCalls; ++k) {
    const int root = (k / 6) % n;
    const size_t count = countOf(k);
    switch (k % 6) {
      case 1:
        GPU_CHECK_LANES(
            lanesBroadcast(s + at[k], r + at[k], count, lanesInt32, root, self.comm, self.stream),
            self.comm);
        break;
      case 2:
        GPU_CHECK_LANES(lanesReduce(s + at[k], r + at[k], count, lanesInt32, lanesSum, root,
                                    self.comm, self.stream),
                        self.comm);
        break;
      case 3:
        GPU_CHECK_LANES(lanesReduceScatter(s + at[k], r + at[k], count, lanesInt32, lanesSum,
                                           self.comm, self.stream),
                        self.comm);
        break;
      case 4:
        GPU_CHECK_LANES(
            lanesAllGather(s + at[k], r + at[k], count, lanesInt32, self.comm, self.stream),
            self.comm);
        break;
      default:
        GPU_CHECK_LANES(lanesAllReduce(s + at[k], r + at[k], count, lanesInt32, lanesSum, self.comm,
                                       self.stream),
                        self.comm);
        break;
    }
  }
  std::vector<std::byte> raw = recv.download();
  std::vector<int32_t> got(raw.size() / 4);
  std::memcpy(got.data(), raw.data(), got.size() * 4);
  for (int k = 0; k < kCalls; ++k) {
    const int root = (k / 6) % n;
    const size_t count = countOf(k);
    const int kind = k % 6;
    if (kind == 2 && self.rank != root) continue;  // a reduce's non-root gets nothing
    const size_t outCount = kind == 4 ? count * ranks : count;
    for (size_t e = 0; e < outCount; ++e) {
      int64_t want = 0;
      if (kind == 1) {
        want = input(root, at[k] + e);
      } else if (kind == 4) {
        want = input(static_cast<int>(e / count), at[k] + e % count);
      } else {
        const size_t i = at[k] + (kind == 3 ? static_cast<size_t>(self.rank) * count : 0) + e;
        for (int q = 0; q < n; ++q) want += input(q, i);
      }
      GPU_CHECK(got[at[k] + e] == static_cast<int32_t>(want),
                "call %d (kind %d, root %d, count %zu) element %zu is %d, expected %lld", k, kind,
                root, count, e, got[at[k] + e], static_cast<long long>(want));
    }
  }
  if (withLl) {
    GPU_CHECK(simpleCalls() > simpleBefore, "no call took the simple kernel");
    GPU_CHECK(ll->callsOf(CollType::AllReduce) > llBefore, "no call took the LL kernel");
  } else {
    GPU_CHECK(simpleCalls() == simpleBefore + kCalls, "%llu of %d calls took the simple kernel",
              static_cast<unsigned long long>(simpleCalls() - simpleBefore), kCalls);
  }
}

TEST(SimpleProcesses, BackToBackWithLlUnderMps) {
  SIMPLE_NEEDS_MPS();
  runUnderMps(
      3, [](GpuRank& self) { backToBack(self, true); }, "ll,simple");
}
TEST(SimpleProcesses, BackToBackAloneUnderMps) {
  SIMPLE_NEEDS_MPS();
  runUnderMps(3, [](GpuRank& self) { backToBack(self, false); });
}

// A captured all-reduce, reduce-scatter and broadcast replayed three times
// with new inputs, eager calls between the replays.
TEST(SimpleProcesses, GraphCaptureAndReplayUnderMps) {
  SIMPLE_NEEDS_MPS();
  runUnderMps(2, [](GpuRank& self) {
    Buffers b(self);
    const size_t count = (1 << 20) / 4 + 3;  // float32
    const std::vector<Call> calls = {
        {CollType::AllReduce, lanesFloat32, Reduction::Sum, count},
        {CollType::ReduceScatter, lanesFloat32, Reduction::Sum, count / 2},
        {CollType::Broadcast, lanesFloat32, Reduction::Sum, count, 1}};
    for (const Call& c : calls) runCall(self, c, b.send, b.recv);  // eager; sets the paths up
    for (const Call& c : calls) {
      cudaGraph_t graph = nullptr;
      GPU_CHECK_CUDA(cudaStreamBeginCapture(self.stream, cudaStreamCaptureModeThreadLocal));
      const void* sendPtr =
          c.coll == CollType::Broadcast && self.rank != c.root ? nullptr : b.send.data();
      lanesResult_t captured = lanesSuccess;
      if (c.coll == CollType::AllReduce)
        captured = lanesAllReduce(sendPtr, b.recv.data(), c.count, c.type, lanesSum, self.comm,
                                  self.stream);
      else if (c.coll == CollType::ReduceScatter)
        captured = lanesReduceScatter(sendPtr, b.recv.data(), c.count, c.type, lanesSum, self.comm,
                                      self.stream);
      else
        captured =
            lanesBroadcast(sendPtr, b.recv.data(), c.count, c.type, c.root, self.comm, self.stream);
      cudaError_t ended = cudaStreamEndCapture(self.stream, &graph);
      GPU_CHECK(captured == lanesSuccess, "%s during capture: %s", describe(c).c_str(),
                lanesGetLastError(self.comm));
      GPU_CHECK_CUDA(ended);
      cudaGraphExec_t exec = nullptr;
      GPU_CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
      for (uint32_t k = 0; k < 3; ++k) {
        // New input, then the replay, checked as the eager call is.
        const size_t elem = test::typeSize(c.type);
        const size_t inCount = c.coll == CollType::ReduceScatter ? c.count * 2 : c.count;
        std::vector<std::byte> input(inCount * elem);
        const uint32_t salt = 1000 + k;
        if (c.coll == CollType::Broadcast)
          test::fillPattern(input.data(), input.size(), c.root, 0, salt);
        else
          test::fillReductionInput(c.type, c.red, self.rank, 2, input.data(), inCount, 0, salt);
        b.send.upload(input.data(), input.size());
        b.recv.fill(kUntouched);
        GPU_CHECK_CUDA(cudaGraphLaunch(exec, self.stream));
        std::vector<std::byte> got = b.recv.download();
        const std::string p =
            c.coll == CollType::Broadcast
                ? test::checkPattern(got.data(), c.count * elem, c.root, 0, salt)
                : test::checkReductionOutput(
                      c.type, c.red, 2, got.data(), c.count,
                      c.coll == CollType::ReduceScatter ? c.count * self.rank : 0, salt);
        GPU_CHECK(p.empty(), "%s, replay %u: %s", describe(c).c_str(), k, p.c_str());
        runCall(self, c, b.send, b.recv);  // an eager call between replays
      }
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
    }
  });
}

// Rank 1 never makes the call: rank 0's kernel gives up within
// LANES_TIMEOUT, and the error names rank 1 and the simple kernel.
TEST(SimpleProcesses, MissingPeerTimesOutNamingIt) {
  SIMPLE_NEEDS_MPS();
  ScopedEnv timeout("LANES_TIMEOUT", "3");
  runUnderMps(2, [](GpuRank& self) {
    if (self.rank == 1) {
      sleep(10);  // alive, but never calls
      return;
    }
    DeviceBuffer send(1 << 20, self.stream), recv(1 << 20, self.stream);
    GPU_CHECK_LANES(lanesAllReduce(send.data(), recv.data(), (1 << 20) / 4, lanesFloat32, lanesSum,
                                   self.comm, self.stream),
                    self.comm);
    test::expectTimeoutNaming(self, "(simple kernel)");
    test::expectTimeoutNaming(self, "for rank 1's data");
  });
}

}  // namespace
}  // namespace lanes
