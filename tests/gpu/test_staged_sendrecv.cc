// Device send/recv on the host-staged path's pair slots (staged_sendrecv.cc),
// ranks as processes sharing GPU 0. DeviceMatrix.Procs*StagedCollectives runs
// the ring for every type; these check the pair choreography itself: several
// chunks and slot reuse, in place, a group with peers in any order and sizes
// that differ per pair, message order across calls, zero counts, the
// shared-GPU size rule, and a receiver that never comes.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/comm.h"
#include "core/plan_record.h"
#include "exec/cuda/staged_collectives.h"
#include "lanes/lanes.h"
#include "tests/common/scoped_env.h"
#include "tests/gpu/gpu_harness.h"

namespace lanes {
namespace {

using test::DeviceBuffer;
using test::GpuRank;
using test::ScopedEnv;

constexpr size_t kPairChunkFloats =
    256 * 1024 / sizeof(float);  // LANES_STAGE_PAIR_CHUNK_BYTES=256K

// What rank `src` sends rank `dst` at element i: exact in float32.
float value(int src, int dst, size_t i) {
  return static_cast<float>(src * 1000 + dst * 100 + static_cast<int>(i % 97));
}

std::vector<float> message(int src, int dst, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = value(src, dst, i);
  return v;
}

void expectMessage(const DeviceBuffer& buf, int src, int dst, size_t count, const char* what) {
  std::string guard;
  const std::vector<std::byte> got = buf.download(&guard);
  GPU_CHECK(guard.empty(), "%s: %s", what, guard.c_str());
  for (size_t i = 0; i < count; ++i) {
    float v = 0;
    std::memcpy(&v, got.data() + i * sizeof(float), sizeof(float));
    GPU_CHECK(v == value(src, dst, i), "%s: element %zu from rank %d is %g, expected %g", what, i,
              src, static_cast<double>(v), static_cast<double>(value(src, dst, i)));
  }
}

const StagedCollectives& stagedPath(const GpuRank& self) {
  const auto* staged = dynamic_cast<const StagedCollectives*>(self.comm->devicePaths.staged.get());
  GPU_CHECK(staged != nullptr && staged->enabled(), "the host-staged path is not set up");
  return *staged;
}

// Ring (out of place and in place), all-to-all with peers in any order and
// sizes per pair, and message order across calls, on 256 KiB pair slots.
void pairChoreography(GpuRank& self, bool slotsInGpuMemory) {
  const StagedCollectives& staged = stagedPath(self);
  GPU_CHECK(staged.pairsUseP2p() == slotsInGpuMemory, "pair slots in %s memory, expected %s",
            staged.pairsUseP2p() ? "GPU" : "host", slotsInGpuMemory ? "GPU" : "host");
  const int n = self.nranks, me = self.rank;
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  lanesComm_t comm = self.comm;
  cudaStream_t st = self.stream;

  // 1. Ring, out of place: 5 whole chunks and a ragged tail each way, so
  //    both pair slots are reused.
  const size_t ring = 5 * kPairChunkFloats + 7;
  {
    DeviceBuffer send(ring * sizeof(float), st), recv(ring * sizeof(float), st);
    send.upload(message(me, next, ring).data(), ring * sizeof(float));
    const uint64_t before = staged.pairChunksIssued();
    GPU_CHECK_LANES(lanesGroupStart(), comm);
    GPU_CHECK_LANES(lanesSend(send.data(), ring, lanesFloat32, next, comm, st), comm);
    GPU_CHECK_LANES(lanesRecv(recv.data(), ring, lanesFloat32, prev, comm, st), comm);
    GPU_CHECK_LANES(lanesGroupEnd(), comm);
    expectMessage(recv, prev, me, ring, "ring");
    const std::string plan = lastPlanOf(comm);
    const char* expected = slotsInGpuMemory ? "p2p_pairs" : "pairs";
    GPU_CHECK(plan == expected, "the ring's plan is \"%s\", expected \"%s\"", plan.c_str(),
              expected);
    GPU_CHECK(staged.pairChunksIssued() - before == 12,
              "the ring issued %llu pair chunks, expected 12 (6 each way): not the pair slots",
              static_cast<unsigned long long>(staged.pairChunksIssued() - before));
  }

  // 2. Ring in place: one buffer sends and receives (as the perf tool's
  //    in-place column does).
  {
    DeviceBuffer buf(ring * sizeof(float), st);
    buf.upload(message(me, next, ring).data(), ring * sizeof(float));
    GPU_CHECK_LANES(lanesGroupStart(), comm);
    GPU_CHECK_LANES(lanesSend(buf.data(), ring, lanesFloat32, next, comm, st), comm);
    GPU_CHECK_LANES(lanesRecv(buf.data(), ring, lanesFloat32, prev, comm, st), comm);
    GPU_CHECK_LANES(lanesGroupEnd(), comm);
    expectMessage(buf, prev, me, ring, "in-place ring");
  }

  // 3. All-to-all in one group: a different size per pair (1 to 6 chunks),
  //    sends listed from the highest peer down, receives from the lowest up.
  {
    auto countOf = [](int src, int dst) {
      return kPairChunkFloats * static_cast<size_t>(1 + src + 2 * dst) + 3 * src + dst;
    };
    std::vector<std::unique_ptr<DeviceBuffer>> sends(static_cast<size_t>(n));
    std::vector<std::unique_ptr<DeviceBuffer>> recvs(static_cast<size_t>(n));
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      sends[p] = std::make_unique<DeviceBuffer>(countOf(me, p) * sizeof(float), st);
      sends[p]->upload(message(me, p, countOf(me, p)).data(), countOf(me, p) * sizeof(float));
      recvs[p] = std::make_unique<DeviceBuffer>(countOf(p, me) * sizeof(float), st);
    }
    GPU_CHECK_LANES(lanesGroupStart(), comm);
    for (int p = n - 1; p >= 0; --p)
      if (p != me)
        GPU_CHECK_LANES(lanesSend(sends[p]->data(), countOf(me, p), lanesFloat32, p, comm, st),
                        comm);
    for (int p = 0; p < n; ++p)
      if (p != me)
        GPU_CHECK_LANES(lanesRecv(recvs[p]->data(), countOf(p, me), lanesFloat32, p, comm, st),
                        comm);
    GPU_CHECK_LANES(lanesGroupEnd(), comm);
    for (int p = 0; p < n; ++p)
      if (p != me) expectMessage(*recvs[p], p, me, countOf(p, me), "all-to-all");
  }

  // 4. Order: two messages to `next` in one group arrive in order, the
  //    second at a receive made later, on its own (its chunks wait in the
  //    pair slots meanwhile); a zero-count pair rides along. B is exactly
  //    the 2 slots: a third chunk would wait for a receive that only comes
  //    after this group, a deadlock by construction (as in NCCL).
  {
    const size_t a = 3 * kPairChunkFloats + 1, b = 2 * kPairChunkFloats;
    DeviceBuffer sendA(a * sizeof(float), st), sendB(b * sizeof(float), st);
    DeviceBuffer recvA(a * sizeof(float), st), recvB(b * sizeof(float), st);
    std::vector<float> mb = message(me, next, b);
    for (float& v : mb) v = -v;  // tells B from A
    sendA.upload(message(me, next, a).data(), a * sizeof(float));
    sendB.upload(mb.data(), b * sizeof(float));
    GPU_CHECK_LANES(lanesGroupStart(), comm);
    GPU_CHECK_LANES(lanesSend(sendA.data(), a, lanesFloat32, next, comm, st), comm);
    GPU_CHECK_LANES(lanesSend(sendB.data(), b, lanesFloat32, next, comm, st), comm);
    GPU_CHECK_LANES(lanesSend(sendA.data(), 0, lanesFloat32, prev, comm, st), comm);
    GPU_CHECK_LANES(lanesRecv(recvB.data(), 0, lanesFloat32, next, comm, st), comm);
    GPU_CHECK_LANES(lanesRecv(recvA.data(), a, lanesFloat32, prev, comm, st), comm);
    GPU_CHECK_LANES(lanesGroupEnd(), comm);
    GPU_CHECK_LANES(lanesRecv(recvB.data(), b, lanesFloat32, prev, comm, st), comm);
    expectMessage(recvA, prev, me, a, "first of two messages");
    const std::vector<std::byte> got = recvB.download();
    for (size_t i = 0; i < b; ++i) {
      float v = 0;
      std::memcpy(&v, got.data() + i * sizeof(float), sizeof(float));
      GPU_CHECK(v == -value(prev, me, i), "second message: element %zu is %g, expected %g", i,
                static_cast<double>(v), static_cast<double>(-value(prev, me, i)));
    }
  }
}

// Three processes on GPU 0 run pairChoreography; the pair slots in shared host
// memory, or in the receivers' GPU memory over CUDA IPC (LANES_PROTO naming
// p2p_pairs, P2P forced: processes on one GPU do not take it on their own).
void runPairChoreography(bool slotsInGpuMemory) {
  ScopedEnv proxy("LANES_SHARED_GPU_PROXY_BYTES", "0");
  ScopedEnv chunk("LANES_STAGE_PAIR_CHUNK_BYTES", "256K");
  const std::optional<std::string> proto =
      slotsInGpuMemory ? std::optional<std::string>("ll,staged,pairs,p2p_pairs,proxy")
                       : std::nullopt;
  ScopedEnv p2p("LANES_P2P_DISABLE",
                slotsInGpuMemory ? std::optional<std::string>("0") : std::nullopt);
  ScopedEnv pairP2p("LANES_PROTO", proto);
  test::runGpuProcesses(
      3, [slotsInGpuMemory](GpuRank& self) { pairChoreography(self, slotsInGpuMemory); });
}

TEST(StagedSendRecvProcesses, RingAllToAllInPlaceAndOrderOnThePairSlots) {
  GPU_SKIP_UNLESS_GPU_FOR_FORK();
  runPairChoreography(false);
}

TEST(StagedSendRecvProcesses, RingAllToAllInPlaceAndOrderOnP2pPairSlots) {
  GPU_SKIP_UNLESS_GPU_FOR_FORK();
  runPairChoreography(true);
}

// A group of rank 0 holds a send to itself (the proxy's) beside an all-reduce;
// rank 1's group holds the all-reduce alone. The all-reduce must take the same
// path on both (it used to follow rank 0's send to the proxy, while rank 1's
// went to the staged path: both waited until LANES_TIMEOUT).
TEST(StagedSendRecvProcesses, SendToItselfBesideACollectiveKeepsTheCollectivesPath) {
  GPU_SKIP_UNLESS_GPU_FOR_FORK();
  ScopedEnv timeout("LANES_TIMEOUT", "20");
  test::runGpuProcesses(2, [](GpuRank& self) {
    const StagedCollectives& staged = stagedPath(self);
    const uint64_t chunksBefore = staged.chunksIssued();
    const size_t count = size_t{1} << 20;  // 4 MiB: the staged all-reduce
    std::vector<float> ones(count, 1.0f);
    DeviceBuffer reduce(count * sizeof(float), self.stream);
    DeviceBuffer selfSend(count * sizeof(float), self.stream);
    DeviceBuffer selfRecv(count * sizeof(float), self.stream);
    reduce.upload(ones.data(), count * sizeof(float));
    selfSend.upload(message(0, 0, count).data(), count * sizeof(float));
    GPU_CHECK_LANES(lanesGroupStart(), self.comm);
    if (self.rank == 0) {
      GPU_CHECK_LANES(lanesSend(selfSend.data(), count, lanesFloat32, 0, self.comm, self.stream),
                      self.comm);
      GPU_CHECK_LANES(lanesRecv(selfRecv.data(), count, lanesFloat32, 0, self.comm, self.stream),
                      self.comm);
    }
    GPU_CHECK_LANES(lanesAllReduce(reduce.data(), reduce.data(), count, lanesFloat32, lanesSum,
                                   self.comm, self.stream),
                    self.comm);
    GPU_CHECK_LANES(lanesGroupEnd(), self.comm);
    const std::vector<std::byte> got = reduce.download();
    for (size_t i = 0; i < count; ++i) {
      float v = 0;
      std::memcpy(&v, got.data() + i * sizeof(float), sizeof(float));
      GPU_CHECK(v == 2.0f, "all-reduce element %zu is %g, expected 2", i, static_cast<double>(v));
    }
    if (self.rank == 0) expectMessage(selfRecv, 0, 0, count, "send to itself");
    GPU_CHECK(staged.chunksIssued() > chunksBefore,
              "the all-reduce did not take the staged path on rank %d", self.rank);
  });
}

// Processes sharing a GPU: a message up to LANES_SHARED_GPU_PROXY_BYTES (256K
// by default) takes the proxy, a larger one the pair slots; both arrive.
TEST(StagedSendRecvProcesses, SmallMessagesBetweenProcessesOnOneGpuTakeTheProxy) {
  GPU_SKIP_UNLESS_GPU_FOR_FORK();
  ScopedEnv proxy("LANES_SHARED_GPU_PROXY_BYTES", std::nullopt);
  test::runGpuProcesses(2, [](GpuRank& self) {
    const StagedCollectives& staged = stagedPath(self);
    GPU_CHECK(staged.proxyUpToBytes() == 256 * 1024, "proxy size %zu, expected 256 KiB",
              staged.proxyUpToBytes());
    const int peer = 1 - self.rank;
    for (const size_t count : {size_t{1024}, size_t{1} << 20}) {
      DeviceBuffer send(count * sizeof(float), self.stream),
          recv(count * sizeof(float), self.stream);
      send.upload(message(self.rank, peer, count).data(), count * sizeof(float));
      const uint64_t before = staged.pairChunksIssued();
      GPU_CHECK_LANES(lanesGroupStart(), self.comm);
      GPU_CHECK_LANES(lanesSend(send.data(), count, lanesFloat32, peer, self.comm, self.stream),
                      self.comm);
      GPU_CHECK_LANES(lanesRecv(recv.data(), count, lanesFloat32, peer, self.comm, self.stream),
                      self.comm);
      GPU_CHECK_LANES(lanesGroupEnd(), self.comm);
      expectMessage(recv, peer, self.rank, count, count == 1024 ? "4 KiB" : "4 MiB");
      const bool pairSlots = staged.pairChunksIssued() != before;
      GPU_CHECK(pairSlots == (count * sizeof(float) > 256 * 1024), "%zu bytes went %s",
                count * sizeof(float), pairSlots ? "through the pair slots" : "through the proxy");
    }
  });
}

// Rank 1 never receives: rank 0's send fills both slots and parks; after
// the communicator's timeout rank 0 fails with lanesTimeout naming rank 1,
// and its stream goes on.
TEST(StagedSendRecvProcesses, MissingReceiverTimesOutNamingIt) {
  GPU_SKIP_UNLESS_GPU_FOR_FORK();
  ScopedEnv proxy("LANES_SHARED_GPU_PROXY_BYTES", "0");
  ScopedEnv chunk("LANES_STAGE_PAIR_CHUNK_BYTES", "256K");
  ScopedEnv timeout("LANES_TIMEOUT", "3");
  test::runGpuProcesses(2, [](GpuRank& self) {
    stagedPath(self);
    if (self.rank == 1) {
      sleep(10);  // alive, but never calls lanesRecv
      return;
    }
    const size_t count = 4 * kPairChunkFloats;
    DeviceBuffer send(count * sizeof(float), self.stream);
    GPU_CHECK_LANES(lanesSend(send.data(), count, lanesFloat32, 1, self.comm, self.stream),
                    self.comm);
    test::syncStream(self.stream, 60);
    lanesResult_t async = lanesSuccess;
    GPU_CHECK_LANES(lanesCommGetAsyncError(self.comm, &async), self.comm);
    const std::string why = lanesGetLastError(self.comm);
    GPU_CHECK(async == lanesTimeout, "async error %d, expected lanesTimeout: %s",
              static_cast<int>(async), why.c_str());
    GPU_CHECK(why.find("rank 1 has taken") != std::string::npos,
              "the timeout does not name the receiver: %s", why.c_str());
  });
}

}  // namespace
}  // namespace lanes
