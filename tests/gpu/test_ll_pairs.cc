// Device send/recv on the LL pair slots (kernels/cuda/ll_pairs.cu,
// src/exec/cuda/ll_pairs.cc), ranks as processes of GPU 0 under an MPS daemon
// of the test's own (their kernels run at once, as on separate GPUs):
//  - sizes from 1 byte to the slots' limit (and one past it, which takes the
//    staged pair slots), misaligned buffers, in place, a ring and an
//    all-to-all with sizes per pair, sends and receives listed in any order;
//  - more messages to one peer in one group than a pair has slots, and a
//    message received in a later group than it was sent;
//  - 300 groups back to back without host synchronisation (slot reuse and
//    the receivers' acknowledgements), sizes changing call to call;
//  - CUDA Graph capture, replayed with new inputs, eager calls between;
//  - a sender or a receiver that never comes: the call fails within
//    LANES_TIMEOUT naming the peer and the message.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/comm.h"
#include "core/plan_record.h"
#include "exec/cuda/ll_allreduce.h"
#include "kernels/cuda/ll_pairs.h"
#include "lanes/lanes.h"
#include "tests/common/scoped_env.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/gpu/mps_daemon.h"

namespace lanes {
namespace {

using test::DeviceBuffer;
using test::GpuRank;
using test::ScopedEnv;

constexpr uint8_t kUntouched = 0xEE;

// Byte i of what rank `src` sends rank `dst` in message `salt`.
uint8_t byteOf(int src, int dst, uint32_t salt, size_t i) {
  return static_cast<uint8_t>((src * 37 + dst * 11 + salt * 7 + i * 13 + (i >> 8)) & 0xff);
}

std::vector<uint8_t> message(int src, int dst, uint32_t salt, size_t bytes) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = byteOf(src, dst, salt, i);
  return v;
}

// `buf` holds message (src -> dst, salt) at `offset`, and kUntouched in the
// `guard` bytes either side of it.
void expectMessage(const DeviceBuffer& buf, size_t offset, int src, int dst, uint32_t salt,
                   size_t bytes, const std::string& what, size_t guard = 0) {
  std::string guards;
  const std::vector<std::byte> got = buf.download(&guards);
  GPU_CHECK(guards.empty(), "%s: %s", what.c_str(), guards.c_str());
  for (size_t i = 0; i < bytes; ++i) {
    const auto v = static_cast<uint8_t>(got[offset + i]);
    GPU_CHECK(v == byteOf(src, dst, salt, i), "%s: byte %zu of %zu from rank %d is %u, expected %u",
              what.c_str(), i, bytes, src, v, byteOf(src, dst, salt, i));
  }
  for (size_t i = offset >= guard ? offset - guard : 0; i < offset; ++i)
    GPU_CHECK(static_cast<uint8_t>(got[i]) == kUntouched, "%s: byte %zu before the message written",
              what.c_str(), offset - i);
  for (size_t i = offset + bytes; i < offset + bytes + guard && i < got.size(); ++i)
    GPU_CHECK(static_cast<uint8_t>(got[i]) == kUntouched, "%s: byte %zu past the message written",
              what.c_str(), i - offset - bytes);
}

const LlAllReduce& llPath(const GpuRank& self) {
  const auto* ll = dynamic_cast<const LlAllReduce*>(self.comm->devicePaths.ll.get());
  GPU_CHECK(ll != nullptr && ll->pairsEnabled(), "the LL pair slots are not set up on rank %d",
            self.rank);
  return *ll;
}

// The LL pair slots carried `expected` messages since `before`, and the
// group's plan says so.
void expectLl(const LlAllReduce& ll, lanesComm_t comm, uint64_t before, uint64_t expected,
              const char* what) {
  GPU_CHECK(ll.pairMessages() - before == expected, "%s: %llu LL messages, expected %llu", what,
            static_cast<unsigned long long>(ll.pairMessages() - before),
            static_cast<unsigned long long>(expected));
  GPU_CHECK(lastPlanOf(comm) == "ll_pairs", "%s: plan \"%s\", expected ll_pairs", what,
            lastPlanOf(comm).c_str());
}

// One group: send `bytes` at sendOffset to `next`, receive from `prev` at recvOffset.
void ring(GpuRank& self, const DeviceBuffer& send, size_t sendOffset, DeviceBuffer& recv,
          size_t recvOffset, size_t bytes, int next, int prev) {
  GPU_CHECK_LANES(lanesGroupStart(), self.comm);
  GPU_CHECK_LANES(
      lanesSend(send.data() + sendOffset, bytes, lanesUint8, next, self.comm, self.stream),
      self.comm);
  GPU_CHECK_LANES(
      lanesRecv(recv.data() + recvOffset, bytes, lanesUint8, prev, self.comm, self.stream),
      self.comm);
  GPU_CHECK_LANES(lanesGroupEnd(), self.comm);
}

void choreography(GpuRank& self) {
  const LlAllReduce& ll = llPath(self);
  const size_t limit = ll.pairMaxBytes();
  GPU_CHECK(limit == cuda::kLlPairMaxBytes, "pair slots of %zu bytes, expected %zu", limit,
            cuda::kLlPairMaxBytes);
  const int n = self.nranks, me = self.rank;
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  cudaStream_t st = self.stream;
  uint32_t salt = 1;

  // 1. Ring, out of place, sizes around a line and the limit, misaligned.
  for (const size_t bytes : {size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{4093},
                             size_t{32} << 10, limit - 1, limit}) {
    for (const size_t shift : {size_t{0}, size_t{3}}) {
      const size_t room = bytes + 64;
      DeviceBuffer send(room, st), recv(room, st);
      send.upload(message(me, next, salt, bytes).data(), bytes, shift);
      recv.fill(kUntouched);
      const uint64_t before = ll.pairMessages();
      ring(self, send, shift, recv, 5 - shift, bytes, next, prev);
      const std::string what = "ring of " + std::to_string(bytes) + " bytes";
      expectMessage(recv, 5 - shift, prev, me, salt, bytes, what, 5 - shift);
      GPU_CHECK(lastPlanOf(self.comm) == "ll_pairs", "%s: plan \"%s\", expected ll_pairs",
                what.c_str(), lastPlanOf(self.comm).c_str());
      GPU_CHECK(ll.pairMessages() - before == 2, "%s: %llu LL messages, expected 2", what.c_str(),
                static_cast<unsigned long long>(ll.pairMessages() - before));
      ++salt;
    }
  }

  // 2. One byte past the limit: the proxy (LANES_PROTO leaves out the staged
  //    pair slots), right all the same.
  {
    const size_t bytes = limit + 1;
    DeviceBuffer send(bytes, st), recv(bytes, st);
    send.upload(message(me, next, salt, bytes).data(), bytes);
    const uint64_t before = ll.pairMessages();
    ring(self, send, 0, recv, 0, bytes, next, prev);
    expectMessage(recv, 0, prev, me, salt++, bytes, "past the limit");
    GPU_CHECK(ll.pairMessages() == before && lastPlanOf(self.comm) == "proxy/p2p",
              "a message past the limit took %s", lastPlanOf(self.comm).c_str());
  }

  // 3. In place: one buffer sends and receives.
  {
    const size_t bytes = 4096 + 3;
    DeviceBuffer buf(bytes, st);
    buf.upload(message(me, next, salt, bytes).data(), bytes);
    const uint64_t before = ll.pairMessages();
    ring(self, buf, 0, buf, 0, bytes, next, prev);
    expectMessage(buf, 0, prev, me, salt++, bytes, "in place");
    expectLl(ll, self.comm, before, 2, "in place");
  }

  // 3b. In place, more messages each way in one group than a pair has slots:
  //     the sends' inputs go aside first, so no receive waits for a send.
  {
    constexpr int kMessages = 3 * cuda::kLlPairDepth;
    const size_t bytes = 2000;
    DeviceBuffer buf(kMessages * bytes, st);
    for (int k = 0; k < kMessages; ++k)
      buf.upload(message(me, next, salt + k, bytes).data(), bytes, k * bytes);
    const uint64_t before = ll.pairMessages();
    GPU_CHECK_LANES(lanesGroupStart(), self.comm);
    for (int k = 0; k < kMessages; ++k) {
      GPU_CHECK_LANES(lanesSend(buf.data() + k * bytes, bytes, lanesUint8, next, self.comm, st),
                      self.comm);
      GPU_CHECK_LANES(lanesRecv(buf.data() + k * bytes, bytes, lanesUint8, prev, self.comm, st),
                      self.comm);
    }
    GPU_CHECK_LANES(lanesGroupEnd(), self.comm);
    for (int k = 0; k < kMessages; ++k)
      expectMessage(buf, k * bytes, prev, me, salt + k, bytes,
                    "in place, message " + std::to_string(k));
    expectLl(ll, self.comm, before, 2 * kMessages, "in place, many messages");
    salt += kMessages;
  }

  // 3c. A receive on the LL pair slots into bytes that a larger send of the
  //     same group (another path) reads: refused on every rank, nothing run.
  {
    const size_t big = limit * 2;
    DeviceBuffer buf(big, st), other(big, st);
    GPU_CHECK_LANES(lanesGroupStart(), self.comm);
    GPU_CHECK_LANES(lanesSend(buf.data(), big, lanesUint8, next, self.comm, st), self.comm);
    GPU_CHECK_LANES(lanesRecv(other.data(), big, lanesUint8, prev, self.comm, st), self.comm);
    GPU_CHECK_LANES(lanesRecv(buf.data() + 100, 1000, lanesUint8, prev, self.comm, st), self.comm);
    GPU_CHECK_LANES(lanesSend(other.data(), 1000, lanesUint8, next, self.comm, st), self.comm);
    const lanesResult_t rc = lanesGroupEnd();
    const std::string why = lanesGetLastError(self.comm);
    GPU_CHECK(
        rc == lanesInvalidUsage && why.find("overlaps the buffer of a send") != std::string::npos,
        "an LL receive overlapping another path's send: result %d, %s", static_cast<int>(rc),
        why.c_str());
  }

  // 4. All-to-all in one group, a size per pair, sends from the highest peer
  //    down and receives from the lowest up.
  {
    auto bytesOf = [&](int src, int dst) { return size_t{1000} * (1 + src + 3 * dst) + src; };
    std::vector<std::unique_ptr<DeviceBuffer>> sends(n), recvs(n);
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      sends[p] = std::make_unique<DeviceBuffer>(bytesOf(me, p), st);
      sends[p]->upload(message(me, p, salt, bytesOf(me, p)).data(), bytesOf(me, p));
      recvs[p] = std::make_unique<DeviceBuffer>(bytesOf(p, me), st);
    }
    GPU_CHECK_LANES(lanesGroupStart(), self.comm);
    for (int p = n - 1; p >= 0; --p)
      if (p != me)
        GPU_CHECK_LANES(lanesSend(sends[p]->data(), bytesOf(me, p), lanesUint8, p, self.comm, st),
                        self.comm);
    for (int p = 0; p < n; ++p)
      if (p != me)
        GPU_CHECK_LANES(lanesRecv(recvs[p]->data(), bytesOf(p, me), lanesUint8, p, self.comm, st),
                        self.comm);
    const uint64_t before = ll.pairMessages();
    GPU_CHECK_LANES(lanesGroupEnd(), self.comm);
    for (int p = 0; p < n; ++p)
      if (p != me) expectMessage(*recvs[p], 0, p, me, salt, bytesOf(p, me), "all-to-all");
    expectLl(ll, self.comm, before, 2 * (n - 1), "all-to-all");
    ++salt;
  }

  // 5. Ten times as many messages to `next` in one group as a pair has
  //    slots (more than a launch's small table holds), a zero-count pair
  //    among them: the receiver's block frees the slots as the sender's
  //    fills them.
  {
    constexpr int kMessages = 10 * cuda::kLlPairDepth + 1;
    const size_t bytes = 3000;
    DeviceBuffer send(kMessages * bytes, st), recv(kMessages * bytes, st);
    for (int k = 0; k < kMessages; ++k)
      send.upload(message(me, next, salt + k, bytes).data(), bytes, k * bytes);
    GPU_CHECK_LANES(lanesGroupStart(), self.comm);
    for (int k = 0; k < kMessages; ++k) {
      GPU_CHECK_LANES(lanesSend(send.data() + k * bytes, bytes, lanesUint8, next, self.comm, st),
                      self.comm);
      if (k == 2)
        GPU_CHECK_LANES(lanesSend(send.data(), 0, lanesUint8, next, self.comm, st), self.comm);
    }
    for (int k = 0; k < kMessages; ++k) {
      GPU_CHECK_LANES(lanesRecv(recv.data() + k * bytes, bytes, lanesUint8, prev, self.comm, st),
                      self.comm);
      if (k == 2)
        GPU_CHECK_LANES(lanesRecv(recv.data(), 0, lanesUint8, prev, self.comm, st), self.comm);
    }
    const uint64_t before = ll.pairMessages();
    GPU_CHECK_LANES(lanesGroupEnd(), self.comm);
    GPU_CHECK(ll.pairMessages() - before == 2 * kMessages,
              "many messages: %llu on the LL pair slots, expected %d",
              static_cast<unsigned long long>(ll.pairMessages() - before), 2 * kMessages);
    for (int k = 0; k < kMessages; ++k)
      expectMessage(recv, k * bytes, prev, me, salt + k, bytes,
                    "message " + std::to_string(k) + " of a group");
    salt += kMessages;
  }

  // 6. Two messages sent in one group, the second received on its own in a
  //    later group (it waits in its slot meanwhile).
  {
    const size_t a = 2000, b = 5000;
    DeviceBuffer sendA(a, st), sendB(b, st), recvA(a, st), recvB(b, st);
    sendA.upload(message(me, next, salt, a).data(), a);
    sendB.upload(message(me, next, salt + 1, b).data(), b);
    GPU_CHECK_LANES(lanesGroupStart(), self.comm);
    GPU_CHECK_LANES(lanesSend(sendA.data(), a, lanesUint8, next, self.comm, st), self.comm);
    GPU_CHECK_LANES(lanesSend(sendB.data(), b, lanesUint8, next, self.comm, st), self.comm);
    GPU_CHECK_LANES(lanesRecv(recvA.data(), a, lanesUint8, prev, self.comm, st), self.comm);
    GPU_CHECK_LANES(lanesGroupEnd(), self.comm);
    const uint64_t before = ll.pairMessages();
    GPU_CHECK_LANES(lanesRecv(recvB.data(), b, lanesUint8, prev, self.comm, st), self.comm);
    expectLl(ll, self.comm, before, 1, "the later receive");
    expectMessage(recvA, 0, prev, me, salt, a, "first of two");
    expectMessage(recvB, 0, prev, me, salt + 1, b, "second of two, received later");
    salt += 2;
  }

  // 7. 300 groups back to back, no host synchronisation, sizes changing.
  {
    constexpr int kCalls = 300;
    constexpr size_t kRoom = 2048;
    DeviceBuffer send(kCalls * kRoom, st), recv(kCalls * kRoom, st);
    std::vector<uint8_t> all(kCalls * kRoom);
    auto sizeOf = [](int k) { return static_cast<size_t>(1 + (k * 389) % kRoom); };
    for (int k = 0; k < kCalls; ++k) {
      const std::vector<uint8_t> m = message(me, next, salt + k, sizeOf(k));
      std::memcpy(all.data() + k * kRoom, m.data(), m.size());
    }
    send.upload(all.data(), all.size());
    recv.fill(kUntouched);
    for (int k = 0; k < kCalls; ++k)
      ring(self, send, k * kRoom, recv, k * kRoom, sizeOf(k), next, prev);
    std::string guards;
    const std::vector<std::byte> got = recv.download(&guards);
    GPU_CHECK(guards.empty(), "back to back: %s", guards.c_str());
    for (int k = 0; k < kCalls; ++k) {
      for (size_t i = 0; i < kRoom; ++i) {
        const auto v = static_cast<uint8_t>(got[k * kRoom + i]);
        const uint8_t want = i < sizeOf(k) ? byteOf(prev, me, salt + k, i) : kUntouched;
        GPU_CHECK(v == want, "back to back: call %d byte %zu is %u, expected %u", k, i, v, want);
      }
    }
    salt += kCalls;
  }

  // 8. A captured ring replayed with new inputs; eager calls between replays.
  {
    const size_t bytes = 12345;
    DeviceBuffer send(bytes, st), recv(bytes, st), eagerSend(bytes, st), eagerRecv(bytes, st);
    cudaGraph_t graph = nullptr;
    GPU_CHECK_CUDA(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    ring(self, send, 0, recv, 0, bytes, next, prev);
    GPU_CHECK_CUDA(cudaStreamEndCapture(st, &graph));
    cudaGraphExec_t exec = nullptr;
    GPU_CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 3; ++replay) {
      send.upload(message(me, next, salt, bytes).data(), bytes);
      GPU_CHECK_CUDA(cudaGraphLaunch(exec, st));
      expectMessage(recv, 0, prev, me, salt, bytes, "replay " + std::to_string(replay));
      ++salt;
      eagerSend.upload(message(me, next, salt, bytes).data(), bytes);
      ring(self, eagerSend, 0, eagerRecv, 0, bytes, next, prev);
      expectMessage(eagerRecv, 0, prev, me, salt, bytes, "eager after replay");
      ++salt;
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
}

// `proto`: LANES_PROTO for the ranks (unset: the defaults).
void runUnderMps(int nranks, const test::GpuBody& body,
                 std::optional<std::string> proto = std::nullopt) {
  ScopedEnv protoEnv("LANES_PROTO", proto), max("LANES_LL_MAX_BYTES", std::nullopt);
  ScopedEnv shared("LANES_LL_SHARED_GPU", std::nullopt);
  test::MpsDaemon mps;
  ASSERT_TRUE(mps.running()) << mps.error();
  test::runGpuProcesses(nranks, body);
}

#define LL_PAIRS_NEED_MPS()                                                             \
  GPU_SKIP_UNLESS_GPU_FOR_FORK();                                                       \
  if (!test::MpsDaemon::available())                                                    \
  GTEST_SKIP() << "nvidia-cuda-mps-control is not on PATH: processes of one GPU would " \
                  "time-slice, and LL is off between them"

// Without the staged pair slots every message up to the LL slots' size takes
// them, whatever the cost model would rank first near the limit.
constexpr const char* kLlPairsOnly = "^pairs";

TEST(LlPairsProcesses, Choreography2RanksUnderMps) {
  LL_PAIRS_NEED_MPS();
  runUnderMps(2, choreography, kLlPairsOnly);
}

TEST(LlPairsProcesses, Choreography3RanksUnderMps) {
  LL_PAIRS_NEED_MPS();
  runUnderMps(3, choreography, kLlPairsOnly);
}

TEST(LlPairsProcesses, Choreography5RanksUnderMps) {
  LL_PAIRS_NEED_MPS();
  runUnderMps(5, choreography, kLlPairsOnly);
}

// By default the cost model chooses: a small message takes the LL pair
// slots, a large one the staged pair slots.
TEST(LlPairsProcesses, DefaultsChooseBySize) {
  LL_PAIRS_NEED_MPS();
  runUnderMps(2, [](GpuRank& self) {
    const LlAllReduce& ll = llPath(self);
    const int peer = 1 - self.rank;
    for (const size_t bytes : {size_t{1000}, size_t{1} << 20}) {
      DeviceBuffer send(bytes, self.stream), recv(bytes, self.stream);
      send.upload(message(self.rank, peer, 3, bytes).data(), bytes);
      const uint64_t before = ll.pairMessages();
      ring(self, send, 0, recv, 0, bytes, peer, peer);
      expectMessage(recv, 0, peer, self.rank, 3, bytes, std::to_string(bytes) + " bytes");
      const bool small = bytes == 1000;
      GPU_CHECK(lastPlanOf(self.comm) == (small ? "ll_pairs" : "pairs"), "%zu bytes took %s", bytes,
                lastPlanOf(self.comm).c_str());
      GPU_CHECK((ll.pairMessages() - before == 2) == small, "%zu bytes: %llu LL messages", bytes,
                static_cast<unsigned long long>(ll.pairMessages() - before));
    }
  });
}

// LANES_PROTO=^ll_pairs: no pair slots in the LL arena; small messages take
// the staged pair slots.
TEST(LlPairsProcesses, LeftOutByProto) {
  LL_PAIRS_NEED_MPS();
  ScopedEnv proto("LANES_PROTO", "^ll_pairs");
  test::MpsDaemon mps;
  ASSERT_TRUE(mps.running()) << mps.error();
  test::runGpuProcesses(2, [](GpuRank& self) {
    const auto* ll = dynamic_cast<const LlAllReduce*>(self.comm->devicePaths.ll.get());
    GPU_CHECK(ll != nullptr && ll->enabled() && !ll->pairsEnabled(),
              "LANES_PROTO=^ll_pairs left the LL pair slots on (or LL off)");
    const int peer = 1 - self.rank;
    DeviceBuffer send(100, self.stream), recv(100, self.stream);
    send.upload(message(self.rank, peer, 9, 100).data(), 100);
    ring(self, send, 0, recv, 0, 100, peer, peer);
    expectMessage(recv, 0, peer, self.rank, 9, 100, "^ll_pairs");
    GPU_CHECK(lastPlanOf(self.comm) == "pairs", "plan \"%s\", expected pairs",
              lastPlanOf(self.comm).c_str());
  });
}

// What rank 0 sees when rank 1 never makes its part: lanesTimeout within
// the communicator's timeout, and lanesGetLastError names rank 1
// (test::expectTimeoutNaming).
using test::expectTimeoutNaming;

TEST(LlPairsProcesses, MissingSenderTimesOutNamingIt) {
  LL_PAIRS_NEED_MPS();
  ScopedEnv timeout("LANES_TIMEOUT", "3");
  runUnderMps(2, [](GpuRank& self) {
    llPath(self);
    if (self.rank == 1) {
      sleep(10);  // alive, but never sends
      return;
    }
    DeviceBuffer recv(1000, self.stream);
    GPU_CHECK_LANES(lanesRecv(recv.data(), 1000, lanesUint8, 1, self.comm, self.stream), self.comm);
    expectTimeoutNaming(self, "device receive #1 from rank 1");
  });
}

// The receiver never comes: the sender's first kLlPairDepth messages wait in
// their slots; the next waits for a slot and times out naming the receiver.
TEST(LlPairsProcesses, MissingReceiverTimesOutNamingIt) {
  LL_PAIRS_NEED_MPS();
  ScopedEnv timeout("LANES_TIMEOUT", "3");
  runUnderMps(2, [](GpuRank& self) {
    llPath(self);
    if (self.rank == 1) {
      sleep(10);  // alive, but never receives
      return;
    }
    DeviceBuffer send(1000, self.stream);
    for (int k = 0; k <= cuda::kLlPairDepth; ++k)
      GPU_CHECK_LANES(lanesSend(send.data(), 1000, lanesUint8, 1, self.comm, self.stream),
                      self.comm);
    expectTimeoutNaming(self, "device send #5 to rank 1");
  });
}

}  // namespace
}  // namespace lanes
