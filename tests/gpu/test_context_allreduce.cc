// Small device all-reduces when every rank is a thread on GPU 0
// (src/exec/cuda/context_allreduce.h): the ranks meet on the host and the last
// to call enqueues one reduce kernel and the copies for all of them. Checked
// here: the path takes calls up to its size and no larger; results against a
// host reference in place and out of place for 2, 3 and 8 ranks; a mismatched
// call fails on every rank without breaking the communicator; a missing rank
// times out naming itself; an abort releases the waiting ranks. (The whole
// datatype x op matrix for thread ranks runs in DeviceMatrix.Threads*Ranks,
// whose small counts take this path.) Skipped when no GPU is visible.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/comm.h"
#include "exec/cuda/context_allreduce.h"
#include "lanes/lanes.h"
#include "tests/gpu/gpu_harness.h"

namespace lanes {
namespace {

using test::GpuRank;

uint64_t callsThroughPath(lanesComm_t comm) {
  auto* path = dynamic_cast<ContextAllReduce*>(comm->devicePaths.sharedContext.get());
  return path == nullptr ? 0 : path->calls();
}

// Rank r's value at i: small integers, exact in float32 sums of up to 8 ranks.
float value(int rank, size_t i) {
  return static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(rank) * 5) % 13) - 6);
}

// Sum, max and avg of float32 over every rank, in place and out of place, at
// counts up to the path's limit (65536 floats = 256 KiB) and one past it.
void sumsMaxAndAvg(GpuRank& self) {
  const uint64_t before = callsThroughPath(self.comm);
  uint64_t expectedCalls = before;
  for (size_t count : {size_t{1}, size_t{7}, size_t{4097}, size_t{65536}, size_t{65537}}) {
    const size_t bytes = count * sizeof(float);
    std::vector<float> in(count);
    for (size_t i = 0; i < count; ++i) in[i] = value(self.rank, i);
    for (lanesRedOp_t op : {lanesSum, lanesMax, lanesAvg}) {
      for (bool inPlace : {false, true}) {
        test::DeviceBuffer send(bytes, self.stream), recv(bytes, self.stream);
        send.upload(in.data(), bytes);
        recv.fill(0xFF);
        void* out = inPlace ? send.data() : recv.data();
        GPU_CHECK_LANES(
            lanesAllReduce(send.data(), out, count, lanesFloat32, op, self.comm, self.stream),
            self.comm);
        if (count * sizeof(float) <= ContextAllReduce::kDefaultMaxBytes) ++expectedCalls;
        const std::vector<std::byte> got = (inPlace ? send : recv).download();
        size_t wrong = 0;
        for (size_t i = 0; i < count; ++i) {
          float want = op == lanesMax ? -100.0f : 0.0f;
          for (int r = 0; r < self.nranks; ++r)
            want = op == lanesMax ? std::max(want, value(r, i)) : want + value(r, i);
          if (op == lanesAvg) want /= static_cast<float>(self.nranks);
          float g;
          std::memcpy(&g, got.data() + i * sizeof(float), sizeof g);
          wrong += g != want ? 1 : 0;
        }
        GPU_CHECK(wrong == 0, "rank %d: count %zu, op %d, %s: %zu wrong", self.rank, count,
                  static_cast<int>(op), inPlace ? "in place" : "out of place", wrong);
      }
    }
  }
  GPU_CHECK(callsThroughPath(self.comm) == expectedCalls,
            "rank %d: %llu calls took the shared-context path, expected %llu", self.rank,
            static_cast<unsigned long long>(callsThroughPath(self.comm) - before),
            static_cast<unsigned long long>(expectedCalls - before));
}

TEST(ContextAllReduce, TwoRanks) {
  GPU_SKIP_UNLESS_GPU_HERE();
  test::runGpuThreads(2, sumsMaxAndAvg);
}
TEST(ContextAllReduce, ThreeRanks) {
  GPU_SKIP_UNLESS_GPU_HERE();
  test::runGpuThreads(3, sumsMaxAndAvg);
}
TEST(ContextAllReduce, EightRanks) {
  GPU_SKIP_UNLESS_GPU_HERE();
  test::runGpuThreads(8, sumsMaxAndAvg);
}

// PreMulSum with each rank's own scalar (rank r scales by r + 1), as NCCL
// defines it: out = sum over r of (r + 1) * x_r, in place and out of place.
TEST(ContextAllReduce, PreMulSumScalesEachRankByItsOwnScalar) {
  GPU_SKIP_UNLESS_GPU_HERE();
  test::runGpuThreads(3, [](GpuRank& self) {
    const uint64_t before = callsThroughPath(self.comm);
    float scalar = static_cast<float>(self.rank + 1);
    lanesRedOp_t op;
    GPU_CHECK_LANES(
        lanesRedOpCreatePreMulSum(&op, &scalar, lanesFloat32, lanesScalarHostImmediate, self.comm),
        self.comm);
    const size_t count = 4097;
    std::vector<float> in(count);
    for (size_t i = 0; i < count; ++i) in[i] = value(self.rank, i);
    for (bool inPlace : {false, true}) {
      test::DeviceBuffer send(count * 4, self.stream), recv(count * 4, self.stream);
      send.upload(in.data(), count * 4);
      void* out = inPlace ? send.data() : recv.data();
      GPU_CHECK_LANES(
          lanesAllReduce(send.data(), out, count, lanesFloat32, op, self.comm, self.stream),
          self.comm);
      const std::vector<std::byte> got = (inPlace ? send : recv).download();
      size_t wrong = 0;
      for (size_t i = 0; i < count; ++i) {
        float want = 0;
        for (int r = 0; r < self.nranks; ++r) want += static_cast<float>(r + 1) * value(r, i);
        float g;
        std::memcpy(&g, got.data() + i * 4, 4);
        wrong += g != want ? 1 : 0;
      }
      GPU_CHECK(wrong == 0, "rank %d, %s: %zu wrong", self.rank,
                inPlace ? "in place" : "out of place", wrong);
    }
    GPU_CHECK(callsThroughPath(self.comm) == before + 2, "rank %d: the calls took another path",
              self.rank);
    GPU_CHECK_LANES(lanesRedOpDestroy(op, self.comm), self.comm);
  });
}

// Rank 1 asks for 8 elements where rank 0 asks for 7: both get
// lanesInvalidUsage naming the two calls, and a matching call then works.
TEST(ContextAllReduce, MismatchedCallsFailOnEveryRankAndTheCommunicatorGoesOn) {
  GPU_SKIP_UNLESS_GPU_HERE();
  test::runGpuThreads(2, [](GpuRank& self) {
    test::DeviceBuffer buf(64, self.stream);
    buf.fill(0);
    const size_t count = self.rank == 0 ? 7 : 8;
    const lanesResult_t r = lanesAllReduce(buf.data(), buf.data(), count, lanesFloat32, lanesSum,
                                           self.comm, self.stream);
    GPU_CHECK(r == lanesInvalidUsage, "rank %d got %d", self.rank, static_cast<int>(r));
    const std::string message = lanesGetLastError(self.comm);
    GPU_CHECK(message.find("different all-reduces") != std::string::npos, "%s", message.c_str());
    GPU_CHECK_LANES(
        lanesAllReduce(buf.data(), buf.data(), 7, lanesFloat32, lanesSum, self.comm, self.stream),
        self.comm);
    (void)buf.download();
  });
}

// Rank 1 never calls: rank 0's call fails after the timeout naming rank 1,
// and rank 1's later call fails too (the communicator failed).
TEST(ContextAllReduce, MissingRankTimesOutNamingIt) {
  GPU_SKIP_UNLESS_GPU_HERE();
  std::vector<lanesComm_t> comms = test::initThreadRanks(2, 2);
  ASSERT_NE(comms[0], nullptr);
  ASSERT_NE(comms[1], nullptr);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  void* buf = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, 64), cudaSuccess);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(lanesAllReduce(buf, buf, 4, lanesFloat32, lanesSum, comms[0], stream), lanesTimeout);
  const std::string message = lanesGetLastError(comms[0]);
  EXPECT_NE(message.find("rank(s) 1 (threads of this process)"), std::string::npos) << message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_NE(lanesAllReduce(buf, buf, 4, lanesFloat32, lanesSum, comms[1], stream), lanesSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaFree(buf);
  cudaStreamDestroy(stream);
  lanesCommAbort(comms[0]);
  lanesCommAbort(comms[1]);
}

// Rank 0 waits in the meeting; aborting rank 1 ends that wait with an error.
TEST(ContextAllReduce, AbortReleasesTheWaitingRank) {
  GPU_SKIP_UNLESS_GPU_HERE();
  std::vector<lanesComm_t> comms(2, nullptr);
  int devs[2] = {0, 0};
  ASSERT_EQ(lanesCommInitAll(comms.data(), 2, devs), lanesSuccess) << lanesGetLastError(nullptr);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  void* buf = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, 64), cudaSuccess);
  std::atomic<bool> returned{false};
  lanesResult_t result = lanesSuccess;
  std::thread rank0([&] {
    cudaSetDevice(0);
    result = lanesAllReduce(buf, buf, 4, lanesFloat32, lanesSum, comms[0], stream);
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(returned.load()) << "rank 0's call returned before rank 1 made it";
  const auto abortedAt = std::chrono::steady_clock::now();
  ASSERT_EQ(lanesCommAbort(comms[1]), lanesSuccess);
  rank0.join();
  // Released by the abort, not by the communicator's timeout (300 s by default).
  EXPECT_LT(std::chrono::steady_clock::now() - abortedAt, std::chrono::seconds(20));
  EXPECT_NE(result, lanesSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaFree(buf);
  cudaStreamDestroy(stream);
  lanesCommAbort(comms[0]);
}

}  // namespace
}  // namespace lanes
