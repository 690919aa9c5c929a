// Bounded waits for GPU work (base/cuda_bounded_wait.h), which the probes use
// so that a first use never hangs on a broken GPU: a stream held on a host
// counter nobody writes times out naming what did not finish, and goes on
// once the counter is written; finished work and a fresh event return at once.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>

#include "base/cuda_bounded_wait.h"
#include "exec/cuda/stream_memops.h"
#include "tests/gpu/gpu_harness.h"

namespace lanes {
namespace {

TEST(BoundedWait, StreamHeldOnAnUnwrittenCounterTimesOutThenGoesOn) {
  GPU_SKIP_UNLESS_GPU_HERE();
  const StreamMemops* ops = nullptr;
  ASSERT_TRUE(StreamMemops::get(&ops).isOk());
  void* page = nullptr;
  ASSERT_EQ(cudaHostAlloc(&page, 4096, cudaHostAllocMapped | cudaHostAllocPortable), cudaSuccess);
  auto* counter = static_cast<volatile uint32_t*>(page);
  *counter = 0;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_TRUE(ops->waitGeq(stream, counter, 1).isOk());

  const auto t0 = std::chrono::steady_clock::now();
  Status s = waitStreamFor(stream, 1.0, "the test's held stream");
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(s.code(), lanesTimeout) << s.message();
  EXPECT_NE(s.message().find("the test's held stream did not finish on the GPU within 1 s"),
            std::string::npos)
      << s.message();
  EXPECT_GE(waited, 0.9);
  EXPECT_LT(waited, 10.0);

  __atomic_store_n(counter, 1u, __ATOMIC_RELEASE);
  s = waitStreamFor(stream, 30.0, "the released stream");
  EXPECT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(page), cudaSuccess);
}

TEST(BoundedWait, FinishedWorkAndAFreshEventReturnAtOnce) {
  GPU_SKIP_UNLESS_GPU_HERE();
  cudaEvent_t fresh = nullptr;
  ASSERT_EQ(cudaEventCreate(&fresh), cudaSuccess);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(waitEventFor(fresh, 0.5, "a fresh event").isOk());  // never recorded: complete
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  EXPECT_TRUE(waitStreamFor(stream, 0.5, "an empty stream").isOk());
  void* buf = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, 1 << 20), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(buf, 0, 1 << 20, stream), cudaSuccess);
  EXPECT_TRUE(waitStreamFor(stream, 5.0, "a memset").isOk());
  EXPECT_TRUE(waitStreamFor(stream, 0.5, "finished work").isOk());
  EXPECT_EQ(cudaFree(buf), cudaSuccess);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(waited, 1.0);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(fresh), cudaSuccess);
}

}  // namespace
}  // namespace lanes
