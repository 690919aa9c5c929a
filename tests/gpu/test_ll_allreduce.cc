// Small-message device all-reduce and all-gather over the LL kernel path (src/exec/cuda/ll_*,
// kernels/cuda/ll_allreduce.cu): ranks as threads sharing GPU 0 (1, 2, 3, 4, 8).
//  - every datatype with sum, a few with prod/max/min/avg/premulsum; counts 1,
//    2, 7, 1024 and the largest LL size; in place, out of place, misaligned
//    pointers; exact expected values, nothing written past the output, and the
//    same bits on every rank;
//  - 200 calls back to back without host synchronisation (slot reuse), with the
//    average time per call at count 2 printed for information;
//  - stream ordering: a kernel before writes the input, kernels after read the
//    output, the stream held by a gate until every call returned;
//  - CUDA Graph capture, replayed 3 times with new inputs, eager calls between;
//  - all-gather (byte patterns, in and out of place), mixed with all-reduces;
//  - failures: a peer that never calls (timeout) or aborts releases the kernel
//    and the error reaches lanesCommGetAsyncError; LANES_PROTO=^ll.
// Skipped when no GPU is visible.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/comm.h"
#include "exec/cuda/ll_allreduce.h"
#include "exec/cuda/staged_collectives.h"
#include "lanes/lanes.h"
#include "tests/common/scoped_env.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/gpu/gpu_kernels.h"
#include "tests/gpu/mps_daemon.h"
#include "tests/multi/data.h"

namespace lanes {
namespace {

using test::DeviceBuffer;
using test::GpuRank;
using test::Reduction;
using test::strprintf;
using test::syncStream;

// Before any CUDA call of this process: enough hardware queues that a rank's
// kernel waiting for a peer never sits in front of the peer's kernel in one
// queue (docs/gpu_data_path.md, "Several ranks on one GPU"). The lead's
// environment wins where it sets it.
const bool kQueuesSet = [] {
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  return true;
}();

constexpr size_t kLlBytes = LlAllReduce::kDefaultMaxBytes;
constexpr uint8_t kUntouched = 0xEE;  // output bytes a call must not write

const LlAllReduce* llOf(lanesComm_t comm) {
  return dynamic_cast<const LlAllReduce*>(comm->devicePaths.ll.get());
}
bool llActive(lanesComm_t comm) {
  const LlAllReduce* ll = llOf(comm);
  return ll != nullptr && ll->enabled();
}

// The LL variables at their defaults for every test (the lead's environment
// may set them for other tests of this binary); restored after.
class LlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GPU_SKIP_UNLESS_GPU_HERE();
    // These tests run ranks as threads of one process, which the library
    // routes to the proxy path for now (gpuDrivenPathsAllowed in
    // src/exec/device_path.h: thread ranks hung on the H200). The LL path
    // with one rank per process is covered by DeviceMatrix.Procs*.
    if (!pathAllowed(SelectionConfig::fromEnv(), DevicePath::LlThreads))
      GTEST_SKIP() << "LL is not used for thread ranks; set LANES_PROTO=ll_threads,staged,proxy "
                      "to test it";
    for (const char* name : {"LANES_LL_MAX_BYTES", "LANES_PROTO"}) {
      const char* v = std::getenv(name);
      saved_.push_back({name, v ? std::string(v) : std::string(), v != nullptr});
      if (std::string(name) != "LANES_PROTO") unsetenv(name);
    }
    // A communicator of one rank is no thread rank: it takes the `ll` entry.
    if (!pathAllowed(SelectionConfig::fromEnv(), DevicePath::Ll))
      setenv("LANES_PROTO", (saved_.back().value + ",ll").c_str(), 1);
  }
  void TearDown() override {
    for (const Saved& s : saved_) {
      if (s.set)
        setenv(s.name, s.value.c_str(), 1);
      else
        unsetenv(s.name);
    }
  }

 private:
  struct Saved {
    const char* name;
    std::string value;
    bool set;
  };
  std::vector<Saved> saved_;
};

// The op of a test reduction; PreMulSum is created on the communicator.
class Op {
 public:
  Op(lanesComm_t comm, lanesDataType_t type, Reduction r) : comm_(comm) {
    switch (r) {
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
    std::vector<std::byte> scalar = test::scalarBytes(type, test::kPreMulScalar);
    GPU_CHECK_LANES(
        lanesRedOpCreatePreMulSum(&op_, scalar.data(), type, lanesScalarHostImmediate, comm_),
        comm_);
    created_ = true;
  }
  ~Op() {
    if (created_) lanesRedOpDestroy(op_, comm_);
  }
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;
  lanesRedOp_t get() const { return op_; }

 private:
  lanesComm_t comm_;
  lanesRedOp_t op_ = lanesSum;
  bool created_ = false;
};

struct Case {
  lanesDataType_t type;
  Reduction red;
};

std::vector<Case> matrixCases() {
  std::vector<Case> cases;
  for (const auto& [type, red] : test::reductionCases()) cases.push_back({type, red});
  return cases;
}

// One call of the matrix: where send and recv sit in their buffers.
struct Placement {
  const char* name;
  size_t sendOffset;  // elements
  size_t recvOffset;  // elements
  bool inPlace;
};
constexpr Placement kAligned{"out of place", 0, 0, false};
constexpr Placement kInPlace{"in place", 0, 0, true};
constexpr Placement kMisaligned{"misaligned", 1, 3, false};

// Runs one all-reduce and checks it; appends this rank's output bytes to *results.
void runCase(GpuRank& self, const Case& c, size_t count, const Placement& where, DeviceBuffer& send,
             DeviceBuffer& recv, std::vector<std::vector<std::byte>>* results) {
  const size_t elem = test::typeSize(c.type);
  const size_t bytes = count * elem;
  const uint32_t salt = static_cast<uint32_t>(count * 31 + static_cast<size_t>(c.red) * 7 +
                                              static_cast<size_t>(c.type));
  const std::string what = strprintf("%s %s count %zu %s", test::typeName(c.type),
                                     test::reductionName(c.red), count, where.name);
  std::vector<std::byte> input(bytes);
  test::fillReductionInput(c.type, c.red, self.rank, self.nranks, input.data(), count, 0, salt);
  send.fill(kUntouched);
  recv.fill(kUntouched);
  const size_t sendAt = where.sendOffset * elem;
  const size_t recvAt = where.inPlace ? sendAt : where.recvOffset * elem;
  DeviceBuffer& out = where.inPlace ? send : recv;
  send.upload(input.data(), bytes, sendAt);

  Op op(self.comm, c.type, c.red);
  GPU_CHECK_LANES(lanesAllReduce(send.data() + sendAt, out.data() + recvAt, count, c.type, op.get(),
                                 self.comm, self.stream),
                  self.comm);
  std::string guards;
  std::vector<std::byte> got = out.download(&guards);
  GPU_CHECK(guards.empty(), "%s: %s", what.c_str(), guards.c_str());
  std::string problem =
      test::checkReductionOutput(c.type, c.red, self.nranks, got.data() + recvAt, count, 0, salt);
  GPU_CHECK(problem.empty(), "%s: %s", what.c_str(), problem.c_str());
  for (size_t i = 0; i < got.size(); ++i) {
    if (i >= recvAt && i < recvAt + bytes) continue;
    GPU_CHECK(got[i] == std::byte{kUntouched}, "%s: byte %zd relative to recv was written",
              what.c_str(), static_cast<ptrdiff_t>(i) - static_cast<ptrdiff_t>(recvAt));
  }
  results->emplace_back(got.begin() + static_cast<ptrdiff_t>(recvAt),
                        got.begin() + static_cast<ptrdiff_t>(recvAt + bytes));
}

// Every case, count and placement of the matrix on one rank.
void runRankMatrix(GpuRank& self, std::vector<std::vector<std::byte>>* mine) {
  const size_t room = kLlBytes + 64;
  DeviceBuffer send(room, self.stream), recv(room, self.stream);
  for (const Case& c : matrixCases()) {
    const size_t maxCount = kLlBytes / test::typeSize(c.type);
    for (size_t count : {size_t{1}, size_t{2}, size_t{7}, size_t{1024}, maxCount}) {
      runCase(self, c, count, kAligned, send, recv, mine);
      if (count == 7 || count == maxCount) runCase(self, c, count, kInPlace, send, recv, mine);
      if (count == 7 || count == 1024) runCase(self, c, count, kMisaligned, send, recv, mine);
    }
  }
  GPU_CHECK(llActive(self.comm), "the LL path was not used (LANES_DEBUG=INFO says why)");
  GPU_CHECK(llOf(self.comm)->maxBytes() == kLlBytes, "agreed LL size %zu, expected %zu",
            llOf(self.comm)->maxBytes(), kLlBytes);
}

void runMatrix(int nranks) {
  std::vector<std::vector<std::vector<std::byte>>> results(static_cast<size_t>(nranks));
  test::runGpuThreads(nranks, [&](GpuRank& self) {
    runRankMatrix(self, &results[static_cast<size_t>(self.rank)]);
  });
  // Every rank reduced the same values in the same order: the same bits.
  for (int r = 1; r < nranks; ++r) {
    ASSERT_EQ(results[static_cast<size_t>(r)].size(), results[0].size());
    for (size_t k = 0; k < results[0].size(); ++k)
      EXPECT_TRUE(results[static_cast<size_t>(r)][k] == results[0][k])
          << "rank " << r << " differs from rank 0 in call " << k;
  }
}

TEST_F(LlTest, Matrix1Rank) { runMatrix(1); }
TEST_F(LlTest, Matrix2Ranks) { runMatrix(2); }
TEST_F(LlTest, Matrix3Ranks) { runMatrix(3); }
TEST_F(LlTest, Matrix4Ranks) { runMatrix(4); }
TEST_F(LlTest, Matrix8Ranks) { runMatrix(8); }

// 200 calls, each with its own input and output, no host synchronisation
// between them: slots are reused 100 times each while ranks run apart.
void backToBack(GpuRank& self, size_t count) {
  constexpr int kCalls = 200;
  const size_t bytes = count * sizeof(float);
  std::vector<std::byte> input(bytes * kCalls);
  for (int c = 0; c < kCalls; ++c)
    test::fillReductionInput(lanesFloat32, Reduction::Sum, self.rank, self.nranks,
                             input.data() + static_cast<size_t>(c) * bytes, count, 0,
                             static_cast<uint32_t>(c + 1000));
  DeviceBuffer in(input.size(), self.stream), out(input.size(), self.stream);
  in.upload(input.data(), input.size());
  out.fill(kUntouched);
  // One call first: the ranks leave it together, so the timing below starts aligned.
  GPU_CHECK_LANES(
      lanesAllReduce(in.data(), out.data(), count, lanesFloat32, lanesSum, self.comm, self.stream),
      self.comm);
  syncStream(self.stream);

  cudaEvent_t start = nullptr, stop = nullptr;
  GPU_CHECK_CUDA(cudaEventCreate(&start));
  GPU_CHECK_CUDA(cudaEventCreate(&stop));
  GPU_CHECK_CUDA(cudaEventRecord(start, self.stream));
  for (int c = 0; c < kCalls; ++c) {
    const size_t at = static_cast<size_t>(c) * bytes;
    GPU_CHECK_LANES(lanesAllReduce(in.data() + at, out.data() + at, count, lanesFloat32, lanesSum,
                                   self.comm, self.stream),
                    self.comm);
  }
  GPU_CHECK_CUDA(cudaEventRecord(stop, self.stream));
  std::vector<std::byte> got = out.download();
  float ms = 0;
  GPU_CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (self.rank == 0)
    std::printf("[ LL       ] %d ranks, %zu bytes: %.2f us per all-reduce (%d back to back)\n",
                self.nranks, bytes, ms * 1000.0 / kCalls, kCalls);
  for (int c = 0; c < kCalls; ++c) {
    std::string p = test::checkReductionOutput(lanesFloat32, Reduction::Sum, self.nranks,
                                               got.data() + static_cast<size_t>(c) * bytes, count,
                                               0, static_cast<uint32_t>(c + 1000));
    GPU_CHECK(p.empty(), "count %zu, call %d of %d: %s", count, c, kCalls, p.c_str());
  }
  GPU_CHECK(llActive(self.comm), "the LL path was not used");
}

TEST_F(LlTest, BackToBack200Calls2Ranks) {
  test::runGpuThreads(2, [](GpuRank& self) {
    for (size_t count : {size_t{2}, size_t{1024}, kLlBytes / sizeof(float)})
      backToBack(self, count);
  });
}
TEST_F(LlTest, BackToBack200Calls4Ranks) {
  test::runGpuThreads(4, [](GpuRank& self) {
    for (size_t count : {size_t{2}, size_t{777}}) backToBack(self, count);
  });
}

// ---- all-gather ----

// Rank r's block is the pattern r "sends to" 0 (the same bytes for every reader).
void allGatherCase(GpuRank& self, lanesDataType_t type, size_t count, bool inPlace,
                   DeviceBuffer& send, DeviceBuffer& recv) {
  const size_t bytes = count * test::typeSize(type);
  const size_t total = bytes * static_cast<size_t>(self.nranks);
  const uint32_t salt = static_cast<uint32_t>(bytes * 3 + (inPlace ? 1 : 0));
  const std::string what = strprintf("all-gather of %zu %s %s", count, test::typeName(type),
                                     inPlace ? "in place" : "out of place");
  std::vector<std::byte> input(bytes);
  test::fillPattern(input.data(), bytes, self.rank, 0, salt);
  send.fill(kUntouched);
  recv.fill(kUntouched);
  const size_t mine = bytes * static_cast<size_t>(self.rank);
  if (inPlace)
    recv.upload(input.data(), bytes, mine);
  else
    send.upload(input.data(), bytes);
  const void* from = inPlace ? static_cast<const void*>(recv.data() + mine) : send.data();
  GPU_CHECK_LANES(lanesAllGather(from, recv.data(), count, type, self.comm, self.stream),
                  self.comm);
  std::string guards;
  std::vector<std::byte> got = recv.download(&guards);
  GPU_CHECK(guards.empty(), "%s: %s", what.c_str(), guards.c_str());
  for (int q = 0; q < self.nranks; ++q) {
    std::string p =
        test::checkPattern(got.data() + bytes * static_cast<size_t>(q), bytes, q, 0, salt);
    GPU_CHECK(p.empty(), "%s, block of rank %d: %s", what.c_str(), q, p.c_str());
  }
  for (size_t i = total; i < got.size(); ++i)
    GPU_CHECK(got[i] == std::byte{kUntouched}, "%s: byte %zu past the output was written",
              what.c_str(), i - total);
}

void runAllGather(int nranks) {
  test::runGpuThreads(nranks, [](GpuRank& self) {
    const size_t room = kLlBytes * static_cast<size_t>(self.nranks) + 64;
    DeviceBuffer send(kLlBytes + 64, self.stream), recv(room, self.stream);
    for (size_t bytes : {size_t{1}, size_t{7}, size_t{8}, size_t{1000}, kLlBytes}) {
      for (bool inPlace : {false, true})
        allGatherCase(self, lanesUint8, bytes, inPlace, send, recv);
    }
    allGatherCase(self, lanesFloat32, kLlBytes / 4, false, send, recv);
    allGatherCase(self, lanesBfloat16, 333, true, send, recv);
    // All-gathers and all-reduces share the slots and the sequence numbers.
    std::vector<std::vector<std::byte>> results;
    DeviceBuffer a(256, self.stream), b(256, self.stream);
    for (int round = 0; round < 3; ++round) {
      allGatherCase(self, lanesInt32, 5, false, send, recv);
      runCase(self, {lanesInt32, Reduction::Sum}, 7, kAligned, a, b, &results);
    }
    GPU_CHECK(llActive(self.comm), "the LL path was not used");
  });
}

TEST_F(LlTest, AllGather1Rank) { runAllGather(1); }
TEST_F(LlTest, AllGather2Ranks) { runAllGather(2); }
TEST_F(LlTest, AllGather3Ranks) { runAllGather(3); }
TEST_F(LlTest, AllGather8Ranks) { runAllGather(8); }

// ---- stream ordering ----

class OwnStream {
 public:
  OwnStream() { GPU_CHECK_CUDA(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~OwnStream() {
    if (s_ != nullptr) cudaStreamDestroy(s_);
  }
  OwnStream(const OwnStream&) = delete;
  OwnStream& operator=(const OwnStream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

std::string orderingProblem(const DeviceBuffer& counters) {
  std::vector<std::byte> raw = counters.download();
  unsigned long long c[2];
  std::memcpy(c, raw.data(), sizeof c);
  if (c[0] == 0) return "";
  return strprintf("%llu elements wrong, the first at index %llu", c[0], c[1]);
}

TEST_F(LlTest, StreamOrderingWithoutHostSync3Ranks) {
  test::runGpuThreads(3, [](GpuRank& self) {
    for (size_t count : {size_t{7}, kLlBytes / sizeof(float)}) {
      const size_t bytes = count * sizeof(float);
      const int salt = static_cast<int>(count % 100);
      DeviceBuffer in(bytes, self.stream), mid(bytes, self.stream), out(bytes, self.stream);
      DeviceBuffer checkMid(16, self.stream), checkOut(16, self.stream);
      const unsigned long long init[2] = {0, ~0ull};
      checkMid.upload(init, sizeof init);
      checkOut.upload(init, sizeof init);
      in.fill(0xFF);  // NaN: stale data never passes a check
      mid.fill(0xFF);
      out.fill(0xFF);
      syncStream(self.stream);

      test::Gate gate(self.stream);
      gate.close();
      auto* inF = reinterpret_cast<float*>(in.data());
      GPU_CHECK_CUDA(test::launchFillOrdering(self.stream, inF, count, self.rank, salt, 1.0f));
      GPU_CHECK_LANES(lanesAllReduce(in.data(), mid.data(), count, lanesFloat32, lanesSum,
                                     self.comm, self.stream),
                      self.comm);
      GPU_CHECK_LANES(lanesAllReduce(mid.data(), out.data(), count, lanesFloat32, lanesSum,
                                     self.comm, self.stream),
                      self.comm);
      // Overwrites the input: the first all-reduce must have read it already.
      GPU_CHECK_CUDA(test::launchFillOrdering(self.stream, inF, count, self.rank, salt + 1, 1.0f));
      auto* cm = reinterpret_cast<unsigned long long*>(checkMid.data());
      auto* co = reinterpret_cast<unsigned long long*>(checkOut.data());
      GPU_CHECK_CUDA(test::launchCheckOrderingSum(self.stream,
                                                  reinterpret_cast<const float*>(mid.data()), count,
                                                  self.nranks, salt, 1.0f, cm, cm + 1));
      GPU_CHECK_CUDA(test::launchCheckOrderingSum(
          self.stream, reinterpret_cast<const float*>(out.data()), count, self.nranks, salt,
          static_cast<float>(self.nranks), co, co + 1));
      gate.open();
      syncStream(self.stream);
      GPU_CHECK(!gate.timedOut(), "count %zu: a Lanes call waited for its stream", count);
      std::string p = orderingProblem(checkMid);
      GPU_CHECK(p.empty(), "count %zu, first all-reduce: %s", count, p.c_str());
      p = orderingProblem(checkOut);
      GPU_CHECK(p.empty(), "count %zu, second all-reduce: %s", count, p.c_str());
    }
    GPU_CHECK(llActive(self.comm), "the LL path was not used");
  });
}

// Calls of one communicator on two streams of a rank: the second waits for
// the first (they share the slots and the sequence number).
TEST_F(LlTest, CallsOnTwoStreams2Ranks) {
  test::runGpuThreads(2, [](GpuRank& self) {
    OwnStream other;
    const size_t count = 300;
    const size_t bytes = count * sizeof(float);
    constexpr int kCalls = 20;
    std::vector<std::byte> input(bytes * kCalls);
    for (int c = 0; c < kCalls; ++c)
      test::fillReductionInput(lanesFloat32, Reduction::Sum, self.rank, self.nranks,
                               input.data() + static_cast<size_t>(c) * bytes, count, 0,
                               static_cast<uint32_t>(c + 7));
    DeviceBuffer in(input.size(), self.stream), out(input.size(), self.stream);
    in.upload(input.data(), input.size());
    syncStream(self.stream);
    for (int c = 0; c < kCalls; ++c) {
      const size_t at = static_cast<size_t>(c) * bytes;
      GPU_CHECK_LANES(lanesAllReduce(in.data() + at, out.data() + at, count, lanesFloat32, lanesSum,
                                     self.comm, c % 2 ? other.get() : self.stream),
                      self.comm);
    }
    syncStream(other.get());
    std::vector<std::byte> got = out.download();
    for (int c = 0; c < kCalls; ++c) {
      std::string p = test::checkReductionOutput(lanesFloat32, Reduction::Sum, self.nranks,
                                                 got.data() + static_cast<size_t>(c) * bytes, count,
                                                 0, static_cast<uint32_t>(c + 7));
      GPU_CHECK(p.empty(), "call %d: %s", c, p.c_str());
    }
  });
}

// ---- CUDA Graph ----

void graphReplays(GpuRank& self) {
  const size_t count = 1000;
  const size_t bytes = count * sizeof(float);
  DeviceBuffer in(bytes, self.stream), out(bytes, self.stream);
  std::vector<std::byte> input(bytes);
  auto run = [&](uint32_t salt, cudaGraphExec_t exec, const char* what) {
    test::fillReductionInput(lanesFloat32, Reduction::Sum, self.rank, self.nranks, input.data(),
                             count, 0, salt);
    in.upload(input.data(), bytes);
    out.fill(kUntouched);
    if (exec != nullptr) {
      GPU_CHECK_CUDA(cudaGraphLaunch(exec, self.stream));
    } else {
      GPU_CHECK_LANES(lanesAllReduce(in.data(), out.data(), count, lanesFloat32, lanesSum,
                                     self.comm, self.stream),
                      self.comm);
    }
    std::vector<std::byte> got = out.download();
    std::string p = test::checkReductionOutput(lanesFloat32, Reduction::Sum, self.nranks,
                                               got.data(), count, 0, salt);
    GPU_CHECK(p.empty(), "%s (salt %u): %s", what, salt, p.c_str());
  };
  run(100, nullptr, "eager call before the capture");  // also sets LL up (collective)
  GPU_CHECK(llActive(self.comm), "the LL path was not used");

  cudaGraph_t graph = nullptr;
  GPU_CHECK_CUDA(cudaStreamBeginCapture(self.stream, cudaStreamCaptureModeThreadLocal));
  lanesResult_t captured =
      lanesAllReduce(in.data(), out.data(), count, lanesFloat32, lanesSum, self.comm, self.stream);
  cudaError_t ended = cudaStreamEndCapture(self.stream, &graph);
  GPU_CHECK(captured == lanesSuccess, "lanesAllReduce during capture: %s",
            lanesGetLastError(self.comm));
  GPU_CHECK_CUDA(ended);
  cudaGraphExec_t exec = nullptr;
  GPU_CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (uint32_t k = 0; k < 3; ++k) {
    run(k, exec, "graph replay");
    run(50 + k, nullptr, "eager call after a replay");
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST_F(LlTest, GraphCaptureAndReplay2Ranks) { test::runGpuThreads(2, graphReplays); }
TEST_F(LlTest, GraphCaptureAndReplay3Ranks) { test::runGpuThreads(3, graphReplays); }

// ---- selection ----

// ---- Processes ----------------------------------------------------------------
// Ranks of two processes on one GPU time-slice, so LL is refused there and the
// proxy serves small all-reduces (docs/gpu_data_path.md); with one GPU per
// process (LANES_TEST_SPREAD_GPUS=1 on a multi-GPU machine) LL is used.
// These run before any CUDA call of this process (fork), so no fixture.

TEST(LlProcesses, RefusedWhereProcessesShareAGpu) {
  GPU_SKIP_UNLESS_GPU_FOR_FORK();
  test::ScopedEnv proto("LANES_PROTO", std::nullopt), shared("LANES_LL_SHARED_GPU", std::nullopt);
  test::ScopedEnv proxy("LANES_SHARED_GPU_PROXY_BYTES", std::nullopt),
      p2p("LANES_P2P_DISABLE", std::nullopt);
  test::runGpuProcesses(2, [](GpuRank& self) {
    const auto* staged =
        dynamic_cast<const StagedCollectives*>(self.comm->devicePaths.staged.get());
    GPU_CHECK(staged != nullptr && staged->enabled(), "the staged path is off");
    const bool sharing = test::rankGpu(0) == test::rankGpu(1);
    GPU_CHECK(llActive(self.comm) != sharing, "the LL path is %s, but the two processes %s a GPU",
              llActive(self.comm) ? "on" : "off", sharing ? "share" : "do not share");
    // Small all-reduces skip the staged path there too (its hand-offs wait
    // for time slices as well): up to the default 256 KiB they take the
    // proxy; above, the cost model chooses, and a 4 MiB one is the staged
    // path's by far. Where they went shows in the staged path's chunk counter.
    GPU_CHECK(staged->proxyUpToBytes() == (sharing ? size_t{256} << 10 : 0),
              "all-reduces up to %zu bytes take the proxy; expected %s", staged->proxyUpToBytes(),
              sharing ? "256 KiB (processes share a GPU)" : "none (one GPU each)");
    const size_t big = (size_t{256} << 10) / sizeof(float) + 1;  // one float past the limit
    const size_t large = (size_t{4} << 20) / sizeof(float);
    DeviceBuffer send(large * sizeof(float), self.stream), recv(large * sizeof(float), self.stream);
    std::vector<std::vector<std::byte>> results;
    const uint64_t before = staged->chunksIssued();
    runCase(self, {lanesFloat32, Reduction::Sum}, 7, kAligned, send, recv, &results);
    runCase(self, {lanesInt32, Reduction::Max}, 7, kInPlace, send, recv, &results);
    runCase(self, {lanesFloat32, Reduction::Sum}, big - 1, kAligned, send, recv, &results);
    GPU_CHECK(!sharing || staged->chunksIssued() == before,
              "calls of at most 256 KiB went to the staged path (%llu chunks)",
              static_cast<unsigned long long>(staged->chunksIssued() - before));
    runCase(self, {lanesFloat32, Reduction::Sum}, large, kAligned, send, recv, &results);
    GPU_CHECK(staged->chunksIssued() > before,
              "an all-reduce of 4 MiB did not take the staged path");
  });
}

TEST(LlProcesses, Matrix2RanksWithSharedGpuOverride) {
  GPU_SKIP_UNLESS_GPU_FOR_FORK();
  test::ScopedEnv proto("LANES_PROTO", std::nullopt), max("LANES_LL_MAX_BYTES", std::nullopt);
  test::ScopedEnv shared("LANES_LL_SHARED_GPU", "1");
  test::runGpuProcesses(2, [](GpuRank& self) {
    std::vector<std::vector<std::byte>> results;
    runRankMatrix(self, &results);
  });
}

// Under MPS the processes' kernels run at once, as on separate GPUs: LL is the
// default for small all-reduces between them, with no override, and nothing goes
// to the proxy for fear of time slices.
TEST(LlProcesses, DefaultUnderMps) {
  GPU_SKIP_UNLESS_GPU_FOR_FORK();
  if (!test::MpsDaemon::available()) GTEST_SKIP() << "nvidia-cuda-mps-control is not on PATH";
  test::ScopedEnv proto("LANES_PROTO", std::nullopt), max("LANES_LL_MAX_BYTES", std::nullopt);
  test::ScopedEnv shared("LANES_LL_SHARED_GPU", std::nullopt),
      proxy("LANES_SHARED_GPU_PROXY_BYTES", std::nullopt);
  test::MpsDaemon mps;
  ASSERT_TRUE(mps.running()) << mps.error();
  test::runGpuProcesses(4, [](GpuRank& self) {
    int runsMps = 0;
    cudaDeviceGetAttribute(&runsMps, cudaDevAttrMpsEnabled, test::rankGpu(self.rank));
    GPU_CHECK(runsMps == 1, "rank %d's context does not run under the test's MPS daemon",
              self.rank);
    const auto* staged =
        dynamic_cast<const StagedCollectives*>(self.comm->devicePaths.staged.get());
    GPU_CHECK(staged != nullptr && staged->proxyUpToBytes() == 0,
              "all-reduces up to %zu bytes take the proxy under MPS",
              staged != nullptr ? staged->proxyUpToBytes() : size_t{0});
    std::vector<std::vector<std::byte>> results;
    runRankMatrix(self, &results);
  });
}

// One reduce-scatter, broadcast or reduce on the LL kernel (LANES_PROTO=ll),
// checked against the test's arithmetic and byte patterns: output where it
// belongs, nothing else written. A broadcast's non-roots pass no send buffer
// and a reduce's no recv buffer, as the API allows.
void runLlCase(GpuRank& self, CollType coll, const Case& c, size_t count, int root, bool inPlace,
               DeviceBuffer& send, DeviceBuffer& recv) {
  const int n = self.nranks;
  const bool isRoot = self.rank == root;
  const size_t elem = test::typeSize(c.type);
  const size_t bytes = count * elem;
  const size_t inBytes = coll == CollType::ReduceScatter ? bytes * static_cast<size_t>(n) : bytes;
  const uint32_t salt =
      static_cast<uint32_t>(count * 131 + static_cast<size_t>(coll) * 17 +
                            static_cast<size_t>(c.red) * 7 + static_cast<size_t>(c.type));
  const std::string what =
      strprintf("%s %s %s count %zu root %d%s", collTypeName(coll), test::typeName(c.type),
                test::reductionName(c.red), count, root, inPlace ? " in place" : "");
  std::vector<std::byte> input(inBytes);
  if (coll == CollType::Broadcast)
    test::fillPattern(input.data(), bytes, root, 0, salt);
  else
    test::fillReductionInput(c.type, c.red, self.rank, n, input.data(), inBytes / elem, 0, salt);
  const bool sends = coll != CollType::Broadcast || isRoot;
  const bool receives = coll != CollType::Reduce || isRoot;
  send.fill(kUntouched);
  recv.fill(kUntouched);
  // A broadcast's non-root has no input: in place, its output starts untouched.
  if (sends) send.upload(input.data(), inBytes, 0);
  // In place: a reduce-scatter's output is its own block of the input.
  const size_t recvAt =
      inPlace && coll == CollType::ReduceScatter ? static_cast<size_t>(self.rank) * bytes : 0;
  DeviceBuffer& out = inPlace ? send : recv;
  const std::byte* sendPtr = sends ? send.data() : nullptr;
  std::byte* recvPtr = receives ? out.data() + recvAt : nullptr;

  const LlAllReduce* ll = llOf(self.comm);
  const uint64_t before = ll != nullptr ? ll->callsOf(coll) : 0;
  Op op(self.comm, c.type, c.red);
  switch (coll) {
    case CollType::ReduceScatter:
      GPU_CHECK_LANES(
          lanesReduceScatter(sendPtr, recvPtr, count, c.type, op.get(), self.comm, self.stream),
          self.comm);
      break;
    case CollType::Broadcast:
      GPU_CHECK_LANES(lanesBroadcast(sendPtr, recvPtr, count, c.type, root, self.comm, self.stream),
                      self.comm);
      break;
    default:
      GPU_CHECK_LANES(
          lanesReduce(sendPtr, recvPtr, count, c.type, op.get(), root, self.comm, self.stream),
          self.comm);
      break;
  }
  GPU_CHECK(ll != nullptr && ll->callsOf(coll) == before + 1, "%s did not take the LL kernel",
            what.c_str());
  std::string guards;
  if (!inPlace && sends) {  // the input stays as it was
    std::vector<std::byte> in = send.download(&guards);
    GPU_CHECK(guards.empty() && std::memcmp(in.data(), input.data(), inBytes) == 0,
              "%s: the send buffer changed %s", what.c_str(), guards.c_str());
  }
  if (!receives) return;  // a reduce's non-root passes no recv buffer
  std::vector<std::byte> got = out.download(&guards);
  GPU_CHECK(guards.empty(), "%s: %s", what.c_str(), guards.c_str());
  std::string problem =
      coll == CollType::Broadcast
          ? test::checkPattern(got.data() + recvAt, bytes, root, 0, salt)
          : test::checkReductionOutput(
                c.type, c.red, n, got.data() + recvAt, count,
                coll == CollType::ReduceScatter ? static_cast<size_t>(self.rank) * count : 0, salt);
  GPU_CHECK(problem.empty(), "%s: %s", what.c_str(), problem.c_str());
  for (size_t i = 0; i < got.size(); ++i) {
    if (i >= recvAt && i < recvAt + bytes) continue;
    if (inPlace && i < inBytes) continue;  // the rest of the input
    GPU_CHECK(got[i] == std::byte{kUntouched}, "%s: byte %zu outside the output was written",
              what.c_str(), i);
  }
}

// 60 broadcasts, reduces and reduce-scatters in turn, the roots rotating, all
// enqueued before any result is read: slot reuse holds only if every rank
// reads a line of every peer in every call (a broadcast's root reads no data;
// without that, it could overwrite a slot a slow reader still polls).
void runRootedBackToBack(GpuRank& self) {
  constexpr int kCalls = 60;
  constexpr size_t kCount = 5;  // int32 per block
  const int n = self.nranks;
  const size_t stride = kCount * static_cast<size_t>(n);  // a call's room, in elements
  std::vector<int32_t> inputs(stride * kCalls);
  for (size_t i = 0; i < inputs.size(); ++i)
    inputs[i] = static_cast<int32_t>(i * 7 + static_cast<size_t>(self.rank) * 1000 + 1);
  DeviceBuffer send(inputs.size() * sizeof(int32_t), self.stream),
      recv(inputs.size() * sizeof(int32_t), self.stream);
  send.upload(inputs.data(), inputs.size() * sizeof(int32_t), 0);
  recv.fill(kUntouched);
  auto* in = reinterpret_cast<int32_t*>(send.data());
  auto* out = reinterpret_cast<int32_t*>(recv.data());
  for (int k = 0; k < kCalls; ++k) {
    const size_t at = static_cast<size_t>(k) * stride;
    const int root = (k / 3) % n;
    switch (k % 3) {
      case 0:
        GPU_CHECK_LANES(
            lanesBroadcast(in + at, out + at, kCount, lanesInt32, root, self.comm, self.stream),
            self.comm);
        break;
      case 1:
        GPU_CHECK_LANES(lanesReduce(in + at, out + at, kCount, lanesInt32, lanesSum, root,
                                    self.comm, self.stream),
                        self.comm);
        break;
      default:
        GPU_CHECK_LANES(lanesReduceScatter(in + at, out + at, kCount, lanesInt32, lanesSum,
                                           self.comm, self.stream),
                        self.comm);
        break;
    }
  }
  std::string guards;
  std::vector<std::byte> raw = recv.download(&guards);
  GPU_CHECK(guards.empty(), "back to back: %s", guards.c_str());
  std::vector<int32_t> got(raw.size() / sizeof(int32_t));
  std::memcpy(got.data(), raw.data(), got.size() * sizeof(int32_t));
  // Element i of rank r's input of call k: inputs as filled on rank r.
  auto inputOf = [&](int r, size_t i) {
    return static_cast<int32_t>(i * 7 + static_cast<size_t>(r) * 1000 + 1);
  };
  for (int k = 0; k < kCalls; ++k) {
    const size_t at = static_cast<size_t>(k) * stride;
    const int root = (k / 3) % n;
    const int kind = k % 3;
    if (kind == 1 && self.rank != root) continue;  // a reduce's non-root gets nothing
    for (size_t e = 0; e < kCount; ++e) {
      int64_t want = 0;
      if (kind == 0) {
        want = inputOf(root, at + e);
      } else {
        const size_t i = at + (kind == 2 ? static_cast<size_t>(self.rank) * kCount : 0) + e;
        for (int r = 0; r < n; ++r) want += inputOf(r, i);
      }
      GPU_CHECK(got[at + e] == static_cast<int32_t>(want),
                "back to back: call %d (%s, root %d) element %zu is %d, expected %lld", k,
                kind == 0   ? "broadcast"
                : kind == 1 ? "reduce"
                            : "reduce-scatter",
                root, e, got[at + e], static_cast<long long>(want));
    }
  }
}

// Reduce-scatter, broadcast and reduce on the LL kernel between processes of
// one GPU under MPS: a type per width and the reductions that differ, counts
// from 1 to the slot's limit (a reduce-scatter's blocks post in whole lines),
// every root of 3 ranks, in place and not; then back to back.
TEST(LlProcesses, ScatterBroadcastReduceUnderMps) {
  GPU_SKIP_UNLESS_GPU_FOR_FORK();
  if (!test::MpsDaemon::available()) GTEST_SKIP() << "nvidia-cuda-mps-control is not on PATH";
  test::ScopedEnv proto("LANES_PROTO", "ll"), max("LANES_LL_MAX_BYTES", std::nullopt);
  test::MpsDaemon mps;
  ASSERT_TRUE(mps.running()) << mps.error();
  test::runGpuProcesses(3, [](GpuRank& self) {
    const int n = self.nranks;
    DeviceBuffer send(kLlBytes + 64, self.stream), recv(kLlBytes + 64, self.stream);
    const std::vector<Case> cases = {
        {lanesFloat32, Reduction::Sum}, {lanesBfloat16, Reduction::Avg},
        {lanesInt8, Reduction::Max},    {lanesFloat64, Reduction::PreMulSum},
        {lanesUint32, Reduction::Prod}, {lanesFloat16, Reduction::Min}};
    for (const Case& c : cases) {
      const size_t elem = test::typeSize(c.type);
      const size_t blockLimit =
          kLlBytes / static_cast<size_t>(n) / cuda::kLlLinePayload * cuda::kLlLinePayload / elem;
      for (CollType coll : {CollType::ReduceScatter, CollType::Broadcast, CollType::Reduce}) {
        const size_t limit = coll == CollType::ReduceScatter ? blockLimit : kLlBytes / elem;
        for (size_t count : {size_t{1}, size_t{3}, size_t{1001} / elem, limit}) {
          for (int root : {0, 1, n - 1}) {
            if (coll == CollType::ReduceScatter && root != 0) continue;  // rootless
            runLlCase(self, coll, c, count, root, false, send, recv);
            runLlCase(self, coll, c, count, root, true, send, recv);
          }
        }
      }
    }
    runRootedBackToBack(self);
  });
}

// Every collective at LL's largest slot (LANES_LL_MAX_BYTES at its hard
// limit), so calls run on grids of several blocks where the GPU's polling share
// allows (3 ranks: 2 blocks each; 8 ranks: a reduce's root on up to 8, the
// others on one): counts at an all-reduce block's edge (kLlLinesPerBlock
// lines; an all-gather's and a reduce root's lie below it, llReadWork) and just
// past it, an odd count and the limit; in place and not.
void runGridCases(GpuRank& self) {
  constexpr size_t kMax = LlAllReduce::kHardMaxBytes;
  const int n = self.nranks;
  const size_t gathered = kMax * static_cast<size_t>(n) + 64;
  DeviceBuffer send(kMax + 64, self.stream), recv(gathered, self.stream);
  GPU_CHECK(llActive(self.comm) && llOf(self.comm)->maxBytes() == kMax,
            "LL is not set up for %zu bytes", kMax);
  const size_t edgeBytes = cuda::kLlLinesPerBlock * cuda::kLlLinePayload;
  std::vector<std::vector<std::byte>> results;
  for (const Case& c : std::vector<Case>{{lanesFloat32, Reduction::Sum},
                                         {lanesBfloat16, Reduction::Avg},
                                         {lanesInt8, Reduction::Max}}) {
    const size_t elem = test::typeSize(c.type);
    for (CollType coll : {CollType::AllReduce, CollType::AllGather, CollType::ReduceScatter,
                          CollType::Broadcast, CollType::Reduce}) {
      const size_t limit =
          coll == CollType::ReduceScatter
              ? kMax / static_cast<size_t>(n) / cuda::kLlLinePayload * cuda::kLlLinePayload / elem
              : kMax / elem;
      for (size_t count : {edgeBytes / elem, edgeBytes / elem + 1, (limit / 3) | 1, limit}) {
        if (count > limit) continue;  // 8 ranks' reduce-scatter: one block's edge is the limit
        for (bool inPlace : {false, true}) {
          const uint64_t before = llOf(self.comm)->callsOf(coll);
          if (coll == CollType::AllReduce)
            runCase(self, c, count, inPlace ? kInPlace : kAligned, send, recv, &results);
          else if (coll == CollType::AllGather)
            allGatherCase(self, c.type, count, inPlace, send, recv);
          else
            runLlCase(self, coll, c, count, n - 1, inPlace, send, recv);
          GPU_CHECK(llOf(self.comm)->callsOf(coll) == before + 1,
                    "%s of %zu %s did not take the LL kernel", collTypeName(coll), count,
                    test::typeName(c.type));
        }
      }
    }
  }
}

void runGridUnderMps(int nranks) {
  test::ScopedEnv proto("LANES_PROTO", "ll"),
      max("LANES_LL_MAX_BYTES", std::to_string(LlAllReduce::kHardMaxBytes));
  test::MpsDaemon mps;
  ASSERT_TRUE(mps.running()) << mps.error();
  test::runGpuProcesses(nranks, runGridCases);
}

TEST(LlProcesses, GridsOfBlocksUnderMps3Ranks) {
  GPU_SKIP_UNLESS_GPU_FOR_FORK();
  if (!test::MpsDaemon::available()) GTEST_SKIP() << "nvidia-cuda-mps-control is not on PATH";
  runGridUnderMps(3);
}
TEST(LlProcesses, GridsOfBlocksUnderMps8Ranks) {
  GPU_SKIP_UNLESS_GPU_FOR_FORK();
  if (!test::MpsDaemon::available()) GTEST_SKIP() << "nvidia-cuda-mps-control is not on PATH";
  runGridUnderMps(8);
}

TEST_F(LlTest, DisabledByEnvironmentStillCorrect) {
  setenv("LANES_PROTO", "^ll", 1);
  test::runGpuThreads(2, [](GpuRank& self) {
    DeviceBuffer send(256, self.stream), recv(256, self.stream);
    std::vector<std::vector<std::byte>> results;
    runCase(self, {lanesFloat32, Reduction::Sum}, 7, kAligned, send, recv, &results);
    GPU_CHECK(!llActive(self.comm), "LANES_PROTO=^ll but the LL path was used");
  });
}

TEST_F(LlTest, MaxBytesFromEnvironment) {
  setenv("LANES_LL_MAX_BYTES", "1K", 1);
  test::runGpuThreads(2, [](GpuRank& self) {
    DeviceBuffer send(4096, self.stream), recv(4096, self.stream);
    std::vector<std::vector<std::byte>> results;
    runCase(self, {lanesInt32, Reduction::Sum}, 256, kAligned, send, recv, &results);  // LL
    runCase(self, {lanesInt32, Reduction::Sum}, 257, kAligned, send, recv, &results);  // not LL
    GPU_CHECK(llActive(self.comm), "the LL path was not used");
    GPU_CHECK(llOf(self.comm)->maxBytes() == 1024, "LL size %zu, expected 1024",
              llOf(self.comm)->maxBytes());
  });
}

// ---- failures ----

// Two communicators over GPU 0 in this thread's process, with a short timeout.
std::vector<lanesComm_t> initPair(int timeoutSeconds) {
  lanesUniqueId id;
  EXPECT_EQ(lanesGetUniqueId(&id), lanesSuccess);
  std::vector<lanesComm_t> comms(2, nullptr);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      cudaSetDevice(0);
      lanesConfig_t config = LANES_CONFIG_INITIALIZER;
      config.timeoutSeconds = timeoutSeconds;
      lanesCommInitRankConfig(&comms[static_cast<size_t>(r)], 2, id, r, &config);
    });
  }
  for (auto& t : threads) t.join();
  return comms;
}

// One small all-reduce on both ranks: sets LL up (a collective step).
void warmUp(const std::vector<lanesComm_t>& comms) {
  std::vector<std::thread> threads;
  for (size_t r = 0; r < comms.size(); ++r) {
    threads.emplace_back([&, r] {
      cudaSetDevice(0);
      OwnStream s;
      DeviceBuffer buf(64, s.get());
      lanesAllReduce(buf.data(), buf.data(), 16, lanesFloat32, lanesSum, comms[r], s.get());
      syncStream(s.get());
    });
  }
  for (auto& t : threads) t.join();
}

bool streamFinishes(cudaStream_t stream, int seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (cudaStreamQuery(stream) != cudaErrorNotReady) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

lanesResult_t asyncErrorWithin(lanesComm_t comm, int seconds) {
  lanesResult_t async = lanesSuccess;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (async == lanesSuccess && std::chrono::steady_clock::now() < deadline) {
    if (lanesCommGetAsyncError(comm, &async) != lanesSuccess) return lanesInternalError;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return async;
}

// Rank 1 never makes the call (and stays alive): rank 0's kernel gives up
// after the communicator's timeout, and the error names rank 1.
TEST_F(LlTest, MissingPeerTimesOut) {
  std::vector<lanesComm_t> comms = initPair(2);
  ASSERT_NE(comms[0], nullptr);
  ASSERT_NE(comms[1], nullptr);
  warmUp(comms);
  ASSERT_TRUE(llActive(comms[0]));
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  {
    OwnStream stream;
    DeviceBuffer buf(1024, stream.get());
    ASSERT_EQ(
        lanesAllReduce(buf.data(), buf.data(), 200, lanesFloat32, lanesSum, comms[0], stream.get()),
        lanesSuccess);
    EXPECT_TRUE(streamFinishes(stream.get(), 60)) << "the LL kernel did not give up";
    EXPECT_EQ(asyncErrorWithin(comms[0], 10), lanesTimeout);
    // Later calls fail at once, with the reason, instead of running out of step.
    EXPECT_EQ(
        lanesAllReduce(buf.data(), buf.data(), 200, lanesFloat32, lanesSum, comms[0], stream.get()),
        lanesTimeout);
    const std::string text = lanesGetLastError(comms[0]);
    EXPECT_NE(text.find("rank 1"), std::string::npos) << text;
    EXPECT_NE(text.find("LL"), std::string::npos) << text;
    syncStream(stream.get());
  }
  lanesCommAbort(comms[0]);
  lanesCommAbort(comms[1]);
}

// Rank 1 aborts while rank 0's kernel waits for it: the kernel is released
// long before the (generous) timeout.
TEST_F(LlTest, PeerAbortReleasesWaitingKernel) {
  std::vector<lanesComm_t> comms = initPair(300);
  ASSERT_NE(comms[0], nullptr);
  ASSERT_NE(comms[1], nullptr);
  warmUp(comms);
  ASSERT_TRUE(llActive(comms[0]));
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  {
    OwnStream stream;
    DeviceBuffer buf(1024, stream.get());
    ASSERT_EQ(
        lanesAllReduce(buf.data(), buf.data(), 200, lanesFloat32, lanesSum, comms[0], stream.get()),
        lanesSuccess);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(cudaStreamQuery(stream.get()), cudaErrorNotReady) << "finished without its peer";
    ASSERT_EQ(lanesCommAbort(comms[1]), lanesSuccess);
    EXPECT_TRUE(streamFinishes(stream.get(), 60)) << "the kernel kept waiting after the abort";
    EXPECT_NE(asyncErrorWithin(comms[0], 30), lanesSuccess);
    syncStream(stream.get());
  }
  EXPECT_EQ(lanesCommAbort(comms[0]), lanesSuccess);
}

}  // namespace
}  // namespace lanes
