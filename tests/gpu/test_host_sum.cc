// Host summation (src/exec/cuda/staged_host_sum.cc): device all-reduce and
// reduce-scatter summed by CPU threads in the staging arena, forced with
// LANES_PROTO=host_sum, the slots in host memory (LANES_P2P_DISABLE=1), ranks
// sharing GPU 0 as threads (2, 3, 8) and as processes (2, 4). Every datatype
// and op (pre-multiplied sum for the float types), counts from 0 to several
// chunks, in place and out of place: each rank's result must have the bits
// of the CPU reduction in rank order (kernels/cpu/reduce.h), which is what
// the reducers compute, and the calls must have gone to the reducers. A peer
// that aborts releases the waiting rank's stream; a rank process killed while
// the others sum fails each of them with an error naming it. Skipped when no
// GPU is visible.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/comm.h"
#include "exec/cuda/staged_collectives.h"
#include "kernels/cpu/reduce.h"
#include "tests/common/scoped_env.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/gpu/host_sum_env.h"
#include "tests/multi/harness.h"

namespace lanes::test {
namespace {

// Rank r's input for one call: bytes from a seed of the call and rank (any
// bit pattern but large exponents: the reducers and the reference compute
// the same ops on them).
std::vector<std::byte> inputOf(int rank, size_t bytes, uint32_t call) {
  uint64_t x = (uint64_t{call} << 32) ^ (static_cast<uint64_t>(rank) * 0x9e3779b97f4a7c15ULL);
  std::vector<std::byte> b(bytes);
  for (size_t i = 0; i < bytes; i += 8) {
    x += 0x9e3779b97f4a7c15ULL;  // splitmix64
    uint64_t z = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = ((z ^ (z >> 27)) * 0x94d049bb133111ebULL) ^ (z >> 31);
    z &= 0x3cffffff3cffffffULL;  // the top byte of every 4 small
    std::memcpy(b.data() + i, &z, std::min<size_t>(8, bytes - i));
  }
  return b;
}

// PreMulSum's scalar in the call's type (0.375, or 3 for integers).
std::vector<std::byte> scalarOf(lanesDataType_t t) {
  std::vector<std::byte> s(datatypeSize(t));
  auto put = [&](auto v) { std::memcpy(s.data(), &v, sizeof(v)); };
  switch (t) {
    case lanesFloat16:
      put(cpu::floatToHalf(0.375f));
      break;
    case lanesBfloat16:
      put(cpu::floatToBf16(0.375f));
      break;
    case lanesFloat32:
      put(0.375f);
      break;
    case lanesFloat64:
      put(0.375);
      break;
    default:
      return {};
  }
  return s;
}

// The reduction of every rank's `count` elements at element `at` of its
// input, in rank order, as the reducers compute it.
std::vector<std::byte> reference(int nranks, size_t inputBytes, uint32_t call, size_t at,
                                 size_t count, lanesDataType_t t, RedOpKind op, double scalar) {
  const size_t elem = datatypeSize(t);
  std::vector<std::byte> out(count * elem), tmp(count * elem);
  for (int r = 0; r < nranks; ++r) {
    const std::vector<std::byte> in = inputOf(r, inputBytes, call);
    const std::byte* src = in.data() + at * elem;
    if (op == RedOpKind::PreMulSum) {
      cpu::premultiply(tmp.data(), src, count, t, scalar);
      src = tmp.data();
    }
    if (r == 0)
      std::memcpy(out.data(), src, count * elem);
    else if (count > 0)
      cpu::reduce(out.data(), out.data(), src, count, t, op);
  }
  if (op == RedOpKind::Avg && count > 0) cpu::finishAvg(out.data(), count, t, nranks);
  return out;
}

struct OpCase {
  lanesRedOp_t op;
  RedOpKind kind;
};
constexpr OpCase kOps[] = {{lanesSum, RedOpKind::Sum},
                           {lanesProd, RedOpKind::Prod},
                           {lanesMax, RedOpKind::Max},
                           {lanesMin, RedOpKind::Min},
                           {lanesAvg, RedOpKind::Avg}};

uint64_t hostSumChunks(lanesComm_t comm) {
  auto* staged = dynamic_cast<StagedCollectives*>(comm->devicePaths.staged.get());
  return staged != nullptr ? staged->hostSumChunks() : 0;
}

// One call on one rank, checked against the reference.
void runCall(GpuRank& self, bool scatter, size_t count, lanesDataType_t t, OpCase op, bool inPlace,
             uint32_t call) {
  const int n = self.nranks;
  const size_t elem = datatypeSize(t);
  const size_t inCount = scatter ? count * static_cast<size_t>(n) : count;
  const std::vector<std::byte> input = inputOf(self.rank, inCount * elem, call);
  DeviceBuffer send(inCount * elem, self.stream), recv(inCount * elem, self.stream);
  std::byte* out = recv.data();
  const std::byte* in = send.data();
  if (inPlace) {
    recv.upload(input.data(), input.size());
    in = recv.data();
    if (scatter) out = recv.data() + static_cast<size_t>(self.rank) * count * elem;
  } else {
    send.upload(input.data(), input.size());
    recv.fill(0xa5);
  }
  double scalar = 1;
  lanesRedOp_t redop = op.op;
  std::vector<std::byte> scalarBytes;
  if (op.kind == RedOpKind::PreMulSum) {
    scalarBytes = scalarOf(t);
    scalar = 0.375;  // exact in every float type
    GPU_CHECK_LANES(lanesRedOpCreatePreMulSum(&redop, scalarBytes.data(), t,
                                              lanesScalarHostImmediate, self.comm),
                    self.comm);
  }
  if (scatter)
    GPU_CHECK_LANES(lanesReduceScatter(in, out, count, t, redop, self.comm, self.stream),
                    self.comm);
  else
    GPU_CHECK_LANES(lanesAllReduce(in, out, count, t, redop, self.comm, self.stream), self.comm);
  if (op.kind == RedOpKind::PreMulSum)
    GPU_CHECK_LANES(lanesRedOpDestroy(redop, self.comm), self.comm);
  const std::vector<std::byte> got = recv.download();
  const size_t at = scatter ? static_cast<size_t>(self.rank) * count : 0;
  const std::vector<std::byte> want =
      reference(n, inCount * elem, call, at, count, t, op.kind, scalar);
  const std::byte* result = got.data() + (scatter && inPlace ? at * elem : 0);
  size_t bad = count;
  for (size_t i = 0; i < count && bad == count; ++i)
    if (std::memcmp(result + i * elem, want.data() + i * elem, elem) != 0) bad = i;
  GPU_CHECK(bad == count, "%s type %d op %d count %zu %s: rank %d's element %zu differs",
            scatter ? "reduce-scatter" : "all-reduce", static_cast<int>(t),
            static_cast<int>(op.kind), count, inPlace ? "in place" : "out of place", self.rank,
            bad);
}

// Every type and op at small and odd counts; the large counts (several
// chunks) for a type of each width and family.
void runMatrix(GpuRank& self) {
  const uint64_t before = hostSumChunks(self.comm);
  uint32_t call = 0;
  for (int ti = 0; ti < lanesNumTypes; ++ti) {
    const auto t = static_cast<lanesDataType_t>(ti);
    const bool large = t == lanesFloat32 || t == lanesBfloat16 || t == lanesInt64 ||
                       t == lanesFloat8e5m2 || t == lanesUint8;
    std::vector<OpCase> ops(std::begin(kOps), std::end(kOps));
    if (!scalarOf(t).empty()) ops.push_back({lanesSum, RedOpKind::PreMulSum});
    for (const OpCase& op : ops) {
      for (bool scatter : {false, true}) {
        std::vector<size_t> counts = {0, 1, 37, 4097};
        if (large && (op.kind == RedOpKind::Sum || op.kind == RedOpKind::Max))
          counts.push_back(scatter ? 300007 : (size_t{3} << 19) + 3);
        for (size_t count : counts)
          for (bool inPlace : {false, true}) runCall(self, scatter, count, t, op, inPlace, ++call);
      }
    }
  }
  GPU_CHECK(hostSumChunks(self.comm) > before,
            "rank %d: no chunk was summed on the host (LANES_DEBUG=INFO says which path ran)",
            self.rank);
}

TEST(HostSum, Threads2Ranks) {
  GPU_SKIP_UNLESS_GPU_HERE();
  HostSumEnv env;
  runGpuThreads(2, runMatrix);
}
TEST(HostSum, Threads3Ranks) {
  GPU_SKIP_UNLESS_GPU_HERE();
  HostSumEnv env;
  runGpuThreads(3, runMatrix);
}
TEST(HostSum, Threads8Ranks) {
  GPU_SKIP_UNLESS_GPU_HERE();
  HostSumEnv env;
  runGpuThreads(8, runMatrix);
}
TEST(HostSum, Procs2Ranks) {
  GPU_SKIP_UNLESS_GPU_FOR_FORK();
  HostSumEnv env;
  runGpuProcesses(2, runMatrix);
}
TEST(HostSum, Procs4Ranks) {
  GPU_SKIP_UNLESS_GPU_FOR_FORK();
  HostSumEnv env;
  runGpuProcesses(4, runMatrix);
}

// Rank 1 aborts instead of joining a large all-reduce: rank 0's call or its
// stream must end with an error naming rank 1, and nothing stays parked on
// the counters its reducer and streams wait for.
TEST(HostSum, PeerAbortReleasesTheWaitingRank) {
  GPU_SKIP_UNLESS_GPU_HERE();
  HostSumEnv env;
  std::vector<lanesComm_t> comms = initThreadRanks(2, 5);
  ASSERT_NE(comms[0], nullptr);
  ASSERT_NE(comms[1], nullptr);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const size_t count = size_t{3} << 20;
  std::vector<void*> bufs(2, nullptr);
  for (void*& b : bufs) ASSERT_EQ(cudaMalloc(&b, count * 4), cudaSuccess);
  std::vector<cudaStream_t> streams(2, nullptr);
  for (cudaStream_t& s : streams)
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  // Both ranks once, so the reducers exist and the path is set up.
  std::vector<std::thread> warm;
  for (int r = 0; r < 2; ++r)
    warm.emplace_back([&, r] {
      cudaSetDevice(0);
      lanesAllReduce(bufs[r], bufs[r], 4096, lanesFloat32, lanesSum, comms[r], streams[r]);
      cudaStreamSynchronize(streams[r]);
    });
  for (std::thread& t : warm) t.join();
  ASSERT_GT(hostSumChunks(comms[0]), 0u) << "the warm-up did not take host summation";

  std::atomic<bool> returned{false};
  lanesResult_t result = lanesSuccess;
  std::thread rank0([&] {
    cudaSetDevice(0);
    result = lanesAllReduce(bufs[0], bufs[0], count, lanesFloat32, lanesSum, comms[0], streams[0]);
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(lanesCommAbort(comms[1]), lanesSuccess);
  rank0.join();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (cudaStreamQuery(streams[0]) == cudaErrorNotReady &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_NE(cudaStreamQuery(streams[0]), cudaErrorNotReady)
      << "rank 0's stream stayed parked after rank 1 aborted";
  lanesResult_t async = lanesSuccess;
  ASSERT_EQ(lanesCommGetAsyncError(comms[0], &async), lanesSuccess);
  EXPECT_TRUE(result != lanesSuccess || async != lanesSuccess)
      << "rank 0 saw no error although rank 1 aborted";
  const std::string message = lanesGetLastError(comms[0]);
  EXPECT_NE(message.find("rank 1"), std::string::npos) << message;
  EXPECT_EQ(lanesCommAbort(comms[0]), lanesSuccess);
  for (cudaStream_t s : streams) cudaStreamDestroy(s);
  for (void* b : bufs) cudaFree(b);
}

// Rank 2 of 3 processes is killed (SIGKILL: no goodbye, its shared memory
// and sockets simply drop) while ranks 0 and 1 sit in a 64 MiB host-summed
// all-reduce waiting for its chunks: each survivor's call or stream must end
// with an error naming rank 2, within the test's deadline, and leave nothing
// mapped behind.
TEST(HostSum, ProcessKilledMidCallFailsEveryOtherRankNamingIt) {
  GPU_SKIP_UNLESS_GPU_FOR_FORK();
  constexpr int kRanks = 3;
  constexpr int kVictim = 2;
  RunOptions options;
  options.env = {{"LANES_PROTO", "host_sum"},
                 {"LANES_P2P_DISABLE", "1"},
                 {"LANES_SHARED_GPU_PROXY_BYTES", "0"}};
  options.watchdogSeconds = 180;
  const std::vector<std::string> shmBefore = listLanesShm();
  ForkedRanks ranks;
  ranks.start(
      kRanks,
      [](int rank, int nranks, const lanesUniqueId& id) {
        GPU_CHECK_CUDA(cudaSetDevice(0));
        cudaStream_t stream = nullptr;
        GPU_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        lanesComm_t comm = initComm(rank, nranks, id);
        GPU_CHECK(comm != nullptr, "rank %d: init failed: %s", rank, lanesGetLastError(nullptr));
        const size_t count = size_t{16} << 20;  // 64 MiB: many 1 MiB chunks
        void* buf = nullptr;
        GPU_CHECK_CUDA(cudaMalloc(&buf, count * sizeof(float)));
        // Every rank once, so the reducers exist and the path is known to serve.
        GPU_CHECK_LANES(lanesAllReduce(buf, buf, 4096, lanesFloat32, lanesSum, comm, stream), comm);
        syncStream(stream);
        GPU_CHECK(hostSumChunks(comm) > 0, "rank %d: the warm-up did not take host summation",
                  rank);
        if (rank == kVictim) {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the others are waiting
          raise(SIGKILL);
        }
        const lanesResult_t result =
            lanesAllReduce(buf, buf, count, lanesFloat32, lanesSum, comm, stream);
        // The stream must come free: the call's waits are released, not left parked.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
        while (cudaStreamQuery(stream) == cudaErrorNotReady &&
               std::chrono::steady_clock::now() < deadline)
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        GPU_CHECK(cudaStreamQuery(stream) != cudaErrorNotReady,
                  "rank %d: the stream stayed parked after rank %d was killed", rank, kVictim);
        lanesResult_t async = lanesSuccess;
        GPU_CHECK_LANES(lanesCommGetAsyncError(comm, &async), comm);
        GPU_CHECK(result != lanesSuccess || async != lanesSuccess,
                  "rank %d saw no error although rank %d was killed", rank, kVictim);
        const std::string message = lanesGetLastError(comm);
        GPU_CHECK(message.find("rank " + std::to_string(kVictim)) != std::string::npos,
                  "rank %d's error does not name rank %d: %s", rank, kVictim, message.c_str());
        GPU_CHECK_LANES(lanesCommAbort(comm), nullptr);
        cudaFree(buf);
        cudaStreamDestroy(stream);
      },
      options);
  const std::vector<RankOutcome> outcomes = ranks.wait();
  ASSERT_EQ(outcomes.size(), static_cast<size_t>(kRanks));
  for (const RankOutcome& o : outcomes) {
    if (o.rank == kVictim) {
      EXPECT_TRUE(o.finished && !o.exited && o.signal == SIGKILL) << o.describe();
    } else {
      EXPECT_TRUE(o.finished && o.exited && o.exitCode == 0) << o.describe();
    }
  }
  expectNoShmLeaks(shmBefore, "the run whose rank 2 was killed");
}

}  // namespace
}  // namespace lanes::test
