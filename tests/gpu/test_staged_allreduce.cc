// Device all-reduce over the host-staged copy-engine path (src/exec/cuda/staged_*):
// ranks sharing GPU 0 as threads (1, 2, 3, 4, 8) and as forked processes (2, 4);
// float32 sum, bfloat16 sum, int32 max, float32 avg; in place and out of place;
// counts from 0 to 40 MiB. Results must equal the exact expected values, bit for
// bit, on every rank. Stream ordering: a kernel writes the input right before the
// all-reduce and another copies the output right after, with no host
// synchronisation in between. Failure handling: a peer that aborts, or never
// arrives, must release the streams parked on its counters. Skipped when no GPU
// is visible.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/comm.h"
#include "exec/cuda/staged_collectives.h"
#include "exec/cuda/stream_memops.h"
#include "kernels/cuda/reduce.h"
#include "lanes/lanes.h"
#include "tests/common/scoped_env.h"
#include "tests/gpu/gpu_harness.h"

namespace lanes {
namespace {

// Before any CUDA call of this process: enough hardware queues for 8 ranks x
// 4 streams on one GPU (see docs/gpu_data_path.md), and 1 MiB chunks so the
// 8-rank arena (9 x 4 slots x chunk) fits a default 64 MiB /dev/shm. The
// lead's environment wins where it sets them.
const bool kEnvSet = [] {
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  setenv("LANES_STAGE_CHUNK_BYTES", "1M", 0);
  return true;
}();

constexpr int kNoDevice = 77;  // a child's exit code when it sees no GPU

bool gpuVisible() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

struct Case {
  lanesDataType_t type;
  lanesRedOp_t op;
  const char* name;
};
constexpr Case kCases[] = {{lanesFloat32, lanesSum, "float32 sum"},
                           {lanesBfloat16, lanesSum, "bfloat16 sum"},
                           {lanesInt32, lanesMax, "int32 max"},
                           {lanesFloat32, lanesAvg, "float32 avg"}};

size_t elemSize(lanesDataType_t t) { return t == lanesBfloat16 ? 2 : 4; }

// Rank r's input at i (small integers: exact in every type and every sum).
// The kernel before the all-reduce doubles `pattern`, so the input is 2 * this.
int patternValue(int rank, size_t i, lanesRedOp_t op) {
  if (op == lanesMax)
    return static_cast<int>((i * 7919 + static_cast<size_t>(rank) * 104729) % 2001) - 1000;
  return static_cast<int>((i * 7 + static_cast<size_t>(rank) * 3) % 11) - 5;
}

uint16_t bf16Bits(float f) {  // exact for the small integers used here
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}

void storeValue(std::vector<uint8_t>& buf, size_t i, lanesDataType_t t, double v) {
  if (t == lanesFloat32) {
    float f = static_cast<float>(v);
    std::memcpy(&buf[i * 4], &f, 4);
  } else if (t == lanesInt32) {
    int32_t x = static_cast<int32_t>(v);
    std::memcpy(&buf[i * 4], &x, 4);
  } else {
    uint16_t b = bf16Bits(static_cast<float>(v));
    std::memcpy(&buf[i * 2], &b, 2);
  }
}

std::vector<uint8_t> hostPattern(int rank, size_t count, const Case& c) {
  std::vector<uint8_t> buf(count * elemSize(c.type));
  for (size_t i = 0; i < count; ++i) storeValue(buf, i, c.type, patternValue(rank, i, c.op));
  return buf;
}

std::vector<uint8_t> expected(int nranks, size_t count, const Case& c) {
  std::vector<uint8_t> buf(count * elemSize(c.type));
  for (size_t i = 0; i < count; ++i) {
    if (c.op == lanesMax) {
      int m = INT32_MIN;
      for (int r = 0; r < nranks; ++r) m = std::max(m, 2 * patternValue(r, i, c.op));
      storeValue(buf, i, c.type, m);
      continue;
    }
    int sum = 0;
    for (int r = 0; r < nranks; ++r) sum += 2 * patternValue(r, i, c.op);
    if (c.op == lanesAvg) {
      float avg = static_cast<float>(sum) / static_cast<float>(nranks);  // as the kernel divides
      std::memcpy(&buf[i * 4], &avg, 4);
    } else {
      storeValue(buf, i, c.type, sum);
    }
  }
  return buf;
}

std::string cudaText(cudaError_t e, const char* what) {
  return std::string(what) + ": " + cudaGetErrorString(e);
}

#define TRY_CUDA(call)                                 \
  do {                                                 \
    cudaError_t e_ = (call);                           \
    if (e_ != cudaSuccess) return cudaText(e_, #call); \
  } while (0)
#define TRY_LANES(call)                                                                 \
  do {                                                                                  \
    lanesResult_t r_ = (call);                                                          \
    if (r_ != lanesSuccess) return std::string(#call) + ": " + lanesGetLastError(comm); \
  } while (0)

// Device buffers of one rank for one call; freed by RAII.
struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(size_t bytes) {
    if (cudaMalloc(&ptr, bytes == 0 ? 16 : bytes) != cudaSuccess) ptr = nullptr;
  }
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// One rank's device buffers, allocated once for the largest call: cudaMalloc and
// cudaFree may synchronise the whole device, and with ranks as threads that
// would wait for a peer's stream parked on this rank's next call: a deadlock
// (NCCL warns of the same). Only stream-ordered calls happen in between.
struct RankBuffers {
  DeviceBuffer pattern, send, recv, check;
  explicit RankBuffers(size_t bytes) : pattern(bytes), send(bytes), recv(bytes), check(bytes) {}
  bool ok() const { return pattern.ptr && send.ptr && recv.ptr && check.ptr; }
};

// One all-reduce on `comm`, stream-ordered between a kernel that writes the
// input and a kernel that copies the output out. Returns "" or what went wrong;
// *result receives this rank's output bytes.
std::string runOne(lanesComm_t comm, int rank, size_t count, const Case& c, bool inPlace,
                   cudaStream_t stream, RankBuffers& b, std::vector<uint8_t>* result) {
  const size_t bytes = count * elemSize(c.type);
  std::vector<uint8_t> pattern = hostPattern(rank, count, c);
  void* recv = inPlace ? b.send.ptr : b.recv.ptr;
  if (bytes > 0) TRY_CUDA(test::copyIn(b.pattern.ptr, pattern.data(), bytes, stream));
  // Sentinels: a result read too early, or input taken too early, shows up.
  const size_t fill = bytes == 0 ? 16 : bytes;
  TRY_CUDA(cudaMemsetAsync(b.send.ptr, 0x7f, fill, stream));
  TRY_CUDA(cudaMemsetAsync(b.recv.ptr, 0x55, fill, stream));
  TRY_CUDA(cudaMemsetAsync(b.check.ptr, 0x33, fill, stream));
  TRY_CUDA(cudaStreamSynchronize(stream));

  // No host synchronisation from here to the stream sync.
  TRY_CUDA(static_cast<cudaError_t>(
      cuda::launchScale(b.send.ptr, b.pattern.ptr, count, c.type, 2.0, stream)));
  TRY_LANES(lanesAllReduce(b.send.ptr, recv, count, c.type, c.op, comm, stream));
  TRY_CUDA(static_cast<cudaError_t>(cuda::launchCopy(b.check.ptr, recv, bytes, stream)));
  TRY_CUDA(cudaStreamSynchronize(stream));

  result->assign(bytes, 0);
  if (bytes > 0) {
    TRY_CUDA(test::copyOut(result->data(), b.check.ptr, bytes, stream));
  }
  lanesResult_t async = lanesSuccess;
  TRY_LANES(lanesCommGetAsyncError(comm, &async));
  if (async != lanesSuccess) return std::string("async error: ") + lanesGetLastError(comm);
  return "";
}

std::string firstMismatch(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                          size_t elem) {
  if (got.size() != want.size())
    return "size " + std::to_string(got.size()) + " != " + std::to_string(want.size());
  for (size_t i = 0; i < got.size(); i += elem) {
    if (std::memcmp(&got[i], &want[i], elem) != 0)
      return "first wrong element at index " + std::to_string(i / elem) + " of " +
             std::to_string(got.size() / elem);
  }
  return "";
}

bool stagedActive(lanesComm_t comm) {
  auto* staged = dynamic_cast<StagedCollectives*>(comm->devicePaths.staged.get());
  return staged != nullptr && staged->enabled();
}

// Every case, count and placement on one rank; compares against the
// expected values. Returns the failures, one per line.
std::string runMatrix(lanesComm_t comm, int rank, int nranks, const std::vector<size_t>& counts,
                      std::vector<std::vector<uint8_t>>* allResults) {
  cudaStream_t stream = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess)
    return "cudaStreamCreate failed";
  RankBuffers buffers(*std::max_element(counts.begin(), counts.end()) * 4);
  if (!buffers.ok()) return "cudaMalloc failed";
  std::string failures;
  for (const Case& c : kCases) {
    for (size_t count : counts) {
      for (bool inPlace : {false, true}) {
        std::vector<uint8_t> got;
        std::string what = std::string(c.name) + " count " + std::to_string(count) +
                           (inPlace ? " in place" : " out of place");
        std::string err = runOne(comm, rank, count, c, inPlace, stream, buffers, &got);
        if (err.empty()) err = firstMismatch(got, expected(nranks, count, c), elemSize(c.type));
        if (!err.empty())
          failures += "rank " + std::to_string(rank) + ", " + what + ": " + err + "\n";
        if (allResults) allResults->push_back(std::move(got));
      }
    }
  }
  if (!stagedActive(comm))
    failures += "rank " + std::to_string(rank) +
                ": the host-staged path was not used (LANES_DEBUG=INFO says why)\n";
  cudaStreamDestroy(stream);
  return failures;
}

const std::vector<size_t> kAllCounts = {0, 1, 7, 4097, (size_t{3} << 20) + 5, size_t{10} << 20};

// ---------------------------------------------------------------------------------
// Processes first: a forked child must start from a parent that never touched
// CUDA (run by ctest, every test is its own process anyway).

// The slots' transport: the host-staging arena, or GPU memory over CUDA IPC
// (ranks of several processes on one GPU: the same-GPU IPC case).
// HostStagedFlagKernels: host staging with the counters written and awaited by
// one-thread kernels (LANES_STREAM_MEMOPS=kernel), the fallback for drivers
// without stream memory operations.
enum class Slots { HostStaged, P2p, HostStagedFlagKernels };
class StagedAllReduceProcesses : public ::testing::TestWithParam<std::tuple<int, Slots>> {};

int childMain(const lanesUniqueId& id, int nranks, int rank, Slots slots) {
  if (!gpuVisible()) return kNoDevice;
  // The matrix's small counts test the staged path too (the proxy would be
  // cheaper for some): it takes every call it serves.
  setenv("LANES_PROTO", "staged", 1);
  setenv("LANES_SHARED_GPU_PROXY_BYTES", "0", 1);  // even between processes on one GPU
  // Past 8 ranks, 4 MiB slots: the default 16 MiB would need (N+1) x 4 x 16 MiB of
  // /dev/shm (704 MiB for 10); the 12 MiB calls still span several chunks.
  if (nranks > 8) setenv("LANES_STAGE_CHUNK_BYTES", "4M", 1);
  setenv("LANES_P2P_DISABLE", slots == Slots::P2p ? "0" : "1", 1);
  if (slots == Slots::HostStagedFlagKernels) setenv("LANES_STREAM_MEMOPS", "kernel", 1);
  if (cudaError_t e = cudaSetDevice(0); e != cudaSuccess) {
    fprintf(stderr, "rank %d: cudaSetDevice(0): %s\n", rank, cudaGetErrorString(e));
    return 2;
  }
  lanesComm_t comm = nullptr;
  if (lanesCommInitRank(&comm, nranks, id, rank) != lanesSuccess) {
    fprintf(stderr, "rank %d: init failed: %s\n", rank, lanesGetLastError(nullptr));
    return 3;
  }
  auto* staged = dynamic_cast<StagedCollectives*>(comm->devicePaths.staged.get());
  const bool p2p = staged != nullptr && staged->usesP2p();
  const StreamMemops* memops = nullptr;
  if (slots == Slots::HostStagedFlagKernels &&
      (!StreamMemops::get(&memops) || memops->usesDriver())) {
    fprintf(stderr, "rank %d: LANES_STREAM_MEMOPS=kernel, but the driver's operations are used\n",
            rank);
    lanesCommDestroy(comm);
    return 5;
  }
  if (p2p != (slots == Slots::P2p)) {
    fprintf(stderr, "rank %d: the staged path %s P2P, expected %s (%s)\n", rank,
            p2p ? "uses" : "does not use", slots == Slots::P2p ? "P2P" : "host staging",
            staged == nullptr   ? "the staged path is off"
            : staged->usesP2p() ? "LANES_P2P_DISABLE=1"
                                : staged->p2pWhy().c_str());
    lanesCommDestroy(comm);
    return 4;
  }
  const std::vector<size_t> counts = {0, 1, 4097, (size_t{3} << 20) + 5};
  std::string failures = runMatrix(comm, rank, nranks, counts, nullptr);
  lanesCommDestroy(comm);
  if (!failures.empty()) {
    fprintf(stderr, "%s", failures.c_str());
    return 1;
  }
  return 0;
}

TEST_P(StagedAllReduceProcesses, MatchesExpectedOnEveryRank) {
  GPU_SKIP_UNLESS_GPU_FOR_FORK();  // this process must not have touched CUDA
  const auto [nranks, slots] = GetParam();
  lanesUniqueId id;
  ASSERT_EQ(lanesGetUniqueId(&id), lanesSuccess);
  std::vector<pid_t> children;
  for (int r = 0; r < nranks; ++r) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0) << "fork failed";
    if (pid == 0) _exit(childMain(id, nranks, r, slots));
    children.push_back(pid);
  }
  // Watchdog: a hang fails the test instead of the run.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  std::vector<int> codes(static_cast<size_t>(nranks), -1);
  size_t left = children.size();
  while (left > 0 && std::chrono::steady_clock::now() < deadline) {
    for (size_t i = 0; i < children.size(); ++i) {
      if (codes[i] != -1) continue;
      int status = 0;
      if (waitpid(children[i], &status, WNOHANG) == children[i]) {
        codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        --left;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (size_t i = 0; i < children.size(); ++i) {
    if (codes[i] == -1) {
      kill(children[i], SIGKILL);
      waitpid(children[i], nullptr, 0);
    }
  }
  ASSERT_EQ(left, 0u) << "ranks still running after 240 s (hang)";
  if (codes[0] == kNoDevice) GTEST_SKIP() << "no CUDA device visible";
  for (int r = 0; r < nranks; ++r) EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Ranks, StagedAllReduceProcesses,
                         ::testing::Combine(::testing::Values(2, 3, 4),
                                            ::testing::Values(Slots::HostStaged, Slots::P2p)),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "ranks" +
                                  (std::get<1>(info.param) == Slots::P2p ? "P2p" : "HostStaged");
                         });

// All-gather, broadcast and reduce-scatter take the staged path where every
// rank sets LANES_STAGED_COLLECTIVES=1 (DeviceMatrix.Procs*StagedCollectives
// checks every type and op; this checks the path was really the staged one,
// over several chunks and slot reuses, with exact float values).
TEST(StagedCollectivesProcesses, GatherBroadcastScatterOnTheStagedPath) {
  GPU_SKIP_UNLESS_GPU_FOR_FORK();
  test::ScopedEnv collectives("LANES_STAGED_COLLECTIVES", "1");
  test::ScopedEnv proxy("LANES_SHARED_GPU_PROXY_BYTES", "0");
  test::ScopedEnv p2p("LANES_P2P_DISABLE", "1");
  test::runGpuProcesses(3, [](test::GpuRank& self) {
    const auto* staged =
        dynamic_cast<const StagedCollectives*>(self.comm->devicePaths.staged.get());
    GPU_CHECK(staged != nullptr && staged->enabled() && staged->servesGatherScatter(),
              "the staged path does not serve all-gather/broadcast/reduce-scatter");
    const int n = self.nranks;
    // 9 MiB + 3 floats per rank: two chunks of the default per-call size and a
    // ragged tail; the calls below reuse all 4 slots several times.
    const size_t count = (size_t{9} << 18) + 3;
    const size_t total = count * static_cast<size_t>(n);
    test::DeviceBuffer send(total * sizeof(float), self.stream);
    test::DeviceBuffer recv(total * sizeof(float), self.stream);
    std::vector<float> mine(total);
    for (size_t i = 0; i < total; ++i) mine[i] = static_cast<float>(self.rank + 1 + (i % 5));
    auto expectAll = [&](const std::vector<std::byte>& got, size_t elems, auto want,
                         const char* what) {
      for (size_t i = 0; i < elems; ++i) {
        float v = 0;
        std::memcpy(&v, got.data() + i * sizeof(float), sizeof(float));
        GPU_CHECK(v == want(i), "%s: element %zu is %g, expected %g", what, i, v,
                  static_cast<double>(want(i)));
      }
    };
    for (int round = 0; round < 2; ++round) {
      // All-gather: block p of recv is rank p's first `count` floats.
      send.upload(mine.data(), count * sizeof(float));
      GPU_CHECK_LANES(
          lanesAllGather(send.data(), recv.data(), count, lanesFloat32, self.comm, self.stream),
          self.comm);
      expectAll(
          recv.download(), total,
          [&](size_t i) { return static_cast<float>(i / count + 1 + (i % count) % 5); },
          "all-gather");
      // Broadcast from rank 1, in place.
      send.upload(mine.data(), count * sizeof(float));
      GPU_CHECK_LANES(
          lanesBroadcast(send.data(), send.data(), count, lanesFloat32, 1, self.comm, self.stream),
          self.comm);
      expectAll(
          send.download(), count, [&](size_t i) { return static_cast<float>(2 + i % 5); },
          "broadcast");
      // Reduce-scatter, sum: every rank's block r sums to n(n+1)/2 + n (i % 5).
      send.upload(mine.data(), total * sizeof(float));
      GPU_CHECK_LANES(lanesReduceScatter(send.data(), recv.data(), count, lanesFloat32, lanesSum,
                                         self.comm, self.stream),
                      self.comm);
      const size_t base = static_cast<size_t>(self.rank) * count;
      expectAll(
          recv.download(), count,
          [&](size_t i) {
            return static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>((base + i) % 5));
          },
          "reduce-scatter");
    }
  });
}

INSTANTIATE_TEST_SUITE_P(FlagKernels, StagedAllReduceProcesses,
                         ::testing::Values(std::tuple{3, Slots::HostStagedFlagKernels}),
                         [](const auto&) { return std::string("3ranksHostStagedFlagKernels"); });

// More ranks than one reduce pass takes (8): ranks 8 and 9 reduce in a second
// pass, which in place must not read their input after the first overwrote it.
INSTANTIATE_TEST_SUITE_P(TwoReducePasses, StagedAllReduceProcesses,
                         ::testing::Values(std::tuple{10, Slots::HostStaged}),
                         [](const auto&) { return std::string("10ranksHostStaged"); });

// ---------------------------------------------------------------------------------
// Threads of this process sharing GPU 0.

class StagedThreads : public ::testing::Test {
 protected:
  void SetUp() override {
    GPU_SKIP_UNLESS_GPU_HERE();  // also tells the harness CUDA is now in use here
    // Small calls would go to the shared-context path (or LL, with
    // LANES_PROTO=ll_threads); these tests are about the staged one.
    setenv("LANES_PROTO", "^ll,shared_context", 1);
  }
  void TearDown() override { unsetenv("LANES_PROTO"); }
  // Ranks as threads on GPU 0 via lanesCommInitAll.
  static std::vector<lanesComm_t> initAll(int nranks) {
    std::vector<lanesComm_t> comms(static_cast<size_t>(nranks), nullptr);
    std::vector<int> devs(static_cast<size_t>(nranks), 0);
    EXPECT_EQ(lanesCommInitAll(comms.data(), nranks, devs.data()), lanesSuccess)
        << lanesGetLastError(nullptr);
    return comms;
  }
};

// Sets the path up (a collective step) with one small all-reduce on every rank.
void warmUp(const std::vector<lanesComm_t>& comms, void* const* bufs) {
  std::vector<std::thread> threads;
  for (size_t r = 0; r < comms.size(); ++r) {
    threads.emplace_back([&, r] {
      cudaSetDevice(0);
      cudaStream_t s;
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
      lanesAllReduce(bufs[r], bufs[r], 16, lanesFloat32, lanesSum, comms[r], s);
      cudaStreamSynchronize(s);
      cudaStreamDestroy(s);
    });
  }
  for (auto& t : threads) t.join();
}

// Thread ranks of one process on one GPU reach each other's GPU slots (P2P)
// unless LANES_P2P_DISABLE=1 keeps the slots in host memory, where they share
// one set of internal streams (stage_streams.h) and stage through inboxes.
struct ThreadCase {
  int nranks;
  bool hostSlots;
};
void PrintTo(const ThreadCase& c, std::ostream* os) {
  *os << c.nranks << " ranks, " << (c.hostSlots ? "host" : "default") << " slots";
}
class StagedAllReduceThreads : public StagedThreads,
                               public ::testing::WithParamInterface<ThreadCase> {};

TEST_P(StagedAllReduceThreads, MatchesExpectedBitIdenticalOnEveryRank) {
  const int nranks = GetParam().nranks;
  const bool hostSlots = GetParam().hostSlots;
  std::optional<test::ScopedEnv> p2p, shared;
  if (hostSlots) p2p.emplace("LANES_P2P_DISABLE", "1");
  if (hostSlots) shared.emplace("LANES_STAGE_SHARED_STREAMS", "auto");
  std::vector<lanesComm_t> comms = initAll(nranks);
  ASSERT_NE(comms[0], nullptr);
  if (hostSlots && nranks > 1) {
    // The path is set up at init; its slots and streams are what this case is about.
    const auto* staged = dynamic_cast<const StagedCollectives*>(comms[0]->devicePaths.staged.get());
    ASSERT_TRUE(staged != nullptr && staged->enabled()) << "the staged path is off";
    EXPECT_FALSE(staged->usesP2p()) << "LANES_P2P_DISABLE=1, yet the slots are in GPU memory";
    EXPECT_TRUE(staged->sharesStreams()) << "thread ranks with host slots share one stream set";
  }
  std::vector<std::string> failures(static_cast<size_t>(nranks));
  std::vector<std::vector<std::vector<uint8_t>>> results(static_cast<size_t>(nranks));
  // Pinned before any rank runs a collective (see test::HostStaging).
  std::vector<std::unique_ptr<test::HostStaging>> stagings;
  for (int r = 0; r < nranks; ++r) stagings.push_back(std::make_unique<test::HostStaging>());
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      test::HostStaging::setMine(stagings[static_cast<size_t>(r)].get());
      if (cudaSetDevice(0) != cudaSuccess) {
        failures[static_cast<size_t>(r)] = "cudaSetDevice(0) failed";
        return;
      }
      failures[static_cast<size_t>(r)] = runMatrix(comms[static_cast<size_t>(r)], r, nranks,
                                                   kAllCounts, &results[static_cast<size_t>(r)]);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < nranks; ++r) EXPECT_EQ(failures[static_cast<size_t>(r)], "");
  // Bit-identical across ranks (each segment is reduced once, by its owner).
  for (int r = 1; r < nranks; ++r) {
    ASSERT_EQ(results[static_cast<size_t>(r)].size(), results[0].size());
    for (size_t k = 0; k < results[0].size(); ++k)
      EXPECT_TRUE(results[static_cast<size_t>(r)][k] == results[0][k])
          << "rank " << r << " differs from rank 0 in call " << k;
  }
  for (lanesComm_t c : comms) EXPECT_EQ(lanesCommDestroy(c), lanesSuccess);
}

INSTANTIATE_TEST_SUITE_P(Ranks, StagedAllReduceThreads,
                         ::testing::Values(ThreadCase{1, false}, ThreadCase{2, false},
                                           ThreadCase{3, false}, ThreadCase{4, false},
                                           ThreadCase{8, false}),
                         [](const auto& info) {
                           return std::to_string(info.param.nranks) + "ranks";
                         });
INSTANTIATE_TEST_SUITE_P(HostSlots, StagedAllReduceThreads,
                         ::testing::Values(ThreadCase{2, true}, ThreadCase{3, true},
                                           ThreadCase{8, true}),
                         [](const auto& info) {
                           return std::to_string(info.param.nranks) + "ranksHostSlots";
                         });

// Waits for `stream` by polling, so a stream parked forever fails the test.
bool streamFinishes(cudaStream_t stream, int seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    cudaError_t q = cudaStreamQuery(stream);
    if (q != cudaErrorNotReady) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Rank 1 never joins the all-reduce and aborts. Rank 0's call waits on the
// host for rank 1 to issue its part (thread ranks keep submission order,
// transport/channel/submit_ledger.h); the abort must end that wait with an error, and
// what rank 0 had already put on its stream must not stay parked.
TEST_F(StagedThreads, PeerAbortReleasesWaitingRank) {
  std::vector<lanesComm_t> comms = initAll(2);
  ASSERT_NE(comms[0], nullptr);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const size_t count = size_t{3} << 20;
  DeviceBuffer buf(count * 4);
  ASSERT_NE(buf.ptr, nullptr);
  DeviceBuffer other(count * 4);
  void* bufs[2] = {buf.ptr, other.ptr};
  warmUp(comms, bufs);
  ASSERT_TRUE(stagedActive(comms[0]));
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  std::atomic<bool> returned{false};
  lanesResult_t result = lanesSuccess;
  std::string message;
  std::thread rank0([&] {
    cudaSetDevice(0);
    result = lanesAllReduce(buf.ptr, buf.ptr, count, lanesFloat32, lanesSum, comms[0], stream);
    message = lanesGetLastError(comms[0]);
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(returned.load()) << "rank 0's call returned before rank 1 issued its part";
  ASSERT_EQ(lanesCommAbort(comms[1]), lanesSuccess);
  rank0.join();
  EXPECT_NE(result, lanesSuccess) << "rank 0's call succeeded although rank 1 aborted";
  EXPECT_NE(message.find("rank 1"), std::string::npos) << message;
  EXPECT_TRUE(streamFinishes(stream, 60)) << "the stream stayed parked after the peer aborted";
  lanesResult_t async = lanesSuccess;
  ASSERT_EQ(lanesCommGetAsyncError(comms[0], &async), lanesSuccess);
  EXPECT_NE(async, lanesSuccess);
  EXPECT_EQ(lanesCommAbort(comms[0]), lanesSuccess);
  cudaStreamDestroy(stream);
}

// Rank 1 never calls the all-reduce (and stays alive): after the
// communicator's timeout rank 0's call fails with lanesTimeout naming rank 1,
// and its stream goes on.
TEST_F(StagedThreads, MissingPeerTimesOut) {
  std::vector<lanesComm_t> comms = test::initThreadRanks(2, 3);
  ASSERT_NE(comms[0], nullptr);
  ASSERT_NE(comms[1], nullptr);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  DeviceBuffer buf(4096 * 4);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  // Setting up the path is collective: both ranks make one all-reduce first.
  DeviceBuffer other(4096 * 4);
  void* bufs[2] = {buf.ptr, other.ptr};
  warmUp(comms, bufs);
  ASSERT_TRUE(stagedActive(comms[0]));
  // Now rank 0 alone.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(lanesAllReduce(buf.ptr, buf.ptr, 4096, lanesFloat32, lanesSum, comms[0], stream),
            lanesTimeout);
  const std::string message = lanesGetLastError(comms[0]);
  EXPECT_NE(message.find("rank 1, a thread of this process"), std::string::npos) << message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_TRUE(streamFinishes(stream, 60)) << "the stream stayed parked past the timeout";
  lanesResult_t async = lanesSuccess;
  ASSERT_EQ(lanesCommGetAsyncError(comms[0], &async), lanesSuccess);
  EXPECT_EQ(async, lanesTimeout) << lanesGetLastError(comms[0]);
  cudaStreamDestroy(stream);
  lanesCommAbort(comms[0]);
  lanesCommAbort(comms[1]);
}

// One thread issues every rank's calls inside one group (NCCL's single-thread
// multi-GPU pattern; here 3 ranks on GPU 0). A thread rank's enqueue waits
// for its peers' part, so the group must enqueue the ranks side by side, not
// one after the other (that would time out). All-reduce, all-gather and a
// send/recv ring, each over more chunks than there are slots.
TEST_F(StagedThreads, OneThreadDrivesEveryRankInOneGroup) {
  constexpr int n = 3;
  std::vector<lanesComm_t> comms = initAll(n);
  ASSERT_NE(comms[0], nullptr);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const size_t count = (size_t{3} << 20) + 3;  // 12 MiB of float32: 13 chunks over 4 slots
  std::vector<std::unique_ptr<DeviceBuffer>> in, out, gathered;
  std::vector<cudaStream_t> streams(n);
  std::vector<std::vector<float>> host(n, std::vector<float>(count));
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i)
      host[r][i] = static_cast<float>(static_cast<int>((i * 5 + static_cast<size_t>(r)) % 9) - 4);
    in.push_back(std::make_unique<DeviceBuffer>(count * 4));
    out.push_back(std::make_unique<DeviceBuffer>(count * 4));
    gathered.push_back(std::make_unique<DeviceBuffer>(count * 4 * n));
    ASSERT_NE(gathered.back()->ptr, nullptr);
    ASSERT_EQ(cudaMemcpy(in[r]->ptr, host[r].data(), count * 4, cudaMemcpyHostToDevice),
              cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), cudaSuccess);
  }
  auto group = [&](const std::function<lanesResult_t(int)>& call) {
    EXPECT_EQ(lanesGroupStart(), lanesSuccess);
    for (int r = 0; r < n; ++r) EXPECT_EQ(call(r), lanesSuccess) << lanesGetLastError(comms[r]);
    EXPECT_EQ(lanesGroupEnd(), lanesSuccess) << lanesGetLastError(comms[0]);
    for (int r = 0; r < n; ++r) {
      EXPECT_TRUE(streamFinishes(streams[r], 60)) << "rank " << r << "'s stream stayed parked";
      EXPECT_EQ(cudaStreamSynchronize(streams[r]), cudaSuccess);
    }
  };
  std::vector<float> got(count * n);
  auto fetch = [&](const DeviceBuffer& b, size_t elems) {
    EXPECT_EQ(cudaMemcpy(got.data(), b.ptr, elems * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  };

  group([&](int r) {
    return lanesAllReduce(in[r]->ptr, out[r]->ptr, count, lanesFloat32, lanesSum, comms[r],
                          streams[r]);
  });
  for (int r = 0; r < n; ++r) {
    fetch(*out[r], count);
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i)
      wrong += got[i] != host[0][i] + host[1][i] + host[2][i] ? 1 : 0;
    EXPECT_EQ(wrong, 0u) << "all-reduce, rank " << r;
  }

  group([&](int r) {
    return lanesAllGather(in[r]->ptr, gathered[r]->ptr, count, lanesFloat32, comms[r], streams[r]);
  });
  for (int r = 0; r < n; ++r) {
    fetch(*gathered[r], count * n);
    size_t wrong = 0;
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < count; ++i) wrong += got[p * count + i] != host[p][i] ? 1 : 0;
    EXPECT_EQ(wrong, 0u) << "all-gather, rank " << r;
  }

  group([&](int r) {
    lanesResult_t a = lanesSend(in[r]->ptr, count, lanesFloat32, (r + 1) % n, comms[r], streams[r]);
    lanesResult_t b =
        lanesRecv(out[r]->ptr, count, lanesFloat32, (r + n - 1) % n, comms[r], streams[r]);
    return a != lanesSuccess ? a : b;
  });
  for (int r = 0; r < n; ++r) {
    fetch(*out[r], count);
    EXPECT_EQ(std::memcmp(got.data(), host[(r + n - 1) % n].data(), count * 4), 0)
        << "send/recv ring, rank " << r;
  }

  auto* staged = dynamic_cast<StagedCollectives*>(comms[0]->devicePaths.staged.get());
  ASSERT_NE(staged, nullptr);
  EXPECT_GT(staged->chunksIssued(), 1u) << "the collectives did not take the staged path";
  EXPECT_GT(staged->pairChunksIssued(), 0u) << "the send/recv did not take the pair slots";
  for (cudaStream_t s : streams) cudaStreamDestroy(s);
  for (lanesComm_t c : comms) EXPECT_EQ(lanesCommDestroy(c), lanesSuccess);
}

// Two communicators over the same two thread ranks, both called in one group
// on each thread. Each thread must enqueue them in the same order (by
// communicator id), or thread 0 waits in X for thread 1 while thread 1 waits
// in Y for thread 0. Enqueued by pointer, the two threads' orders differ only
// where the allocator placed the handles so, which the test arranges by
// making pairs until two of them sort differently on the two threads.
TEST_F(StagedThreads, GroupsOverTwoCommunicatorsMeetInOneOrder) {
  // Two ranks as threads, 20 s timeout: a hang shows as a failure, not 300 s.
  auto pair = [] { return test::initThreadRanks(2, 20); };
  // The old bug needs the pointer order of (X, Y) to differ between the two
  // threads; make communicator pairs until two of them do.
  std::vector<std::vector<lanesComm_t>> made;
  size_t xi = 0, yi = 0;
  constexpr int kPairs = 17;
  for (int attempt = 0; attempt < kPairs && yi == 0; ++attempt) {
    made.push_back(pair());
    ASSERT_NE(made.back()[0], nullptr);
    ASSERT_NE(made.back()[1], nullptr);
    const size_t last = made.size() - 1;
    for (size_t i = 0; i < last && yi == 0; ++i)
      if (std::less<>()(made[i][0], made[last][0]) != std::less<>()(made[i][1], made[last][1])) {
        xi = i;
        yi = last;
      }
  }
  std::vector<std::vector<lanesComm_t>> spare;  // destroyed at the end
  for (size_t i = 0; i < made.size(); ++i)
    if (yi == 0 || (i != xi && i != yi)) spare.push_back(made[i]);
  auto destroyAll = [&] {
    for (const auto& comms : spare)
      for (lanesComm_t c : comms) lanesCommDestroy(c);
  };
  if (yi == 0) {
    destroyAll();
    GTEST_SKIP() << kPairs
                 << " communicator pairs all sorted alike on both threads; the "
                    "order this test is about could not be arranged";
  }
  const std::vector<lanesComm_t> x = made[xi], y = made[yi];
  const size_t count = size_t{3} << 20;  // the staged path, several chunks
  std::vector<std::string> failures(2);
  std::atomic<bool> parked{false};
  // Pageable copies only while no peer has a call in flight (see HostStaging).
  std::barrier<> inputsReady(2), resultsReady(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      cudaSetDevice(0);
      DeviceBuffer a(count * 4), b(count * 4);
      cudaStream_t s;
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
      std::vector<float> ones(count, static_cast<float>(r + 1));
      cudaMemcpyAsync(a.ptr, ones.data(), count * 4, cudaMemcpyHostToDevice, s);
      cudaMemcpyAsync(b.ptr, ones.data(), count * 4, cudaMemcpyHostToDevice, s);
      cudaStreamSynchronize(s);
      inputsReady.arrive_and_wait();
      std::string& f = failures[static_cast<size_t>(r)];
      lanesGroupStart();
      if (lanesAllReduce(a.ptr, a.ptr, count, lanesFloat32, lanesSum, x[r], s) != lanesSuccess)
        f += "X: " + std::string(lanesGetLastError(x[r])) + "\n";
      if (lanesAllReduce(b.ptr, b.ptr, count, lanesFloat32, lanesSum, y[r], s) != lanesSuccess)
        f += "Y: " + std::string(lanesGetLastError(y[r])) + "\n";
      if (lanesGroupEnd() != lanesSuccess) f += "group: " + std::string(lanesGetLastError(x[r]));
      if (!streamFinishes(s, 60)) {
        f += "the stream stayed parked\n";
        parked = true;
      }
      resultsReady.arrive_and_wait();
      if (parked.load()) {
        // Device-wide calls (a pageable copy, cudaFree) would wait for the
        // parked stream: leave the buffers and the stream.
        a.ptr = b.ptr = nullptr;
        return;
      }
      std::vector<float> got(count);
      for (void* p : {a.ptr, b.ptr}) {
        cudaMemcpy(got.data(), p, count * 4, cudaMemcpyDeviceToHost);
        if (std::count(got.begin(), got.end(), 3.0f) != static_cast<std::ptrdiff_t>(count))
          f += "a result is not 1 + 2 everywhere\n";
      }
      cudaStreamDestroy(s);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures[0], "");
  EXPECT_EQ(failures[1], "");
  if (parked.load()) return;  // the communicators' streams may still be held
  destroyAll();
  for (lanesComm_t c : {x[0], x[1], y[0], y[1]}) EXPECT_EQ(lanesCommDestroy(c), lanesSuccess);
}

// Capture into a CUDA Graph is refused with a clear error, not silently broken.
TEST_F(StagedThreads, GraphCaptureIsRefused) {
  std::vector<lanesComm_t> comms = initAll(2);
  ASSERT_NE(comms[0], nullptr);
  // Set the path up first (collective), then capture on rank 0 only.
  DeviceBuffer buf0(64), buf1(64);
  void* bufs[2] = {buf0.ptr, buf1.ptr};
  warmUp(comms, bufs);
  ASSERT_TRUE(stagedActive(comms[0]));
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  lanesResult_t r =
      lanesAllReduce(buf0.ptr, buf0.ptr, 16, lanesFloat32, lanesSum, comms[0], stream);
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(stream, &graph);
  if (graph) cudaGraphDestroy(graph);
  EXPECT_EQ(r, lanesInvalidUsage);
  EXPECT_NE(std::string(lanesGetLastError(comms[0])).find("CUDA Graph"), std::string::npos)
      << lanesGetLastError(comms[0]);
  cudaStreamDestroy(stream);
  for (lanesComm_t c : comms) lanesCommDestroy(c);
}

}  // namespace
}  // namespace lanes
