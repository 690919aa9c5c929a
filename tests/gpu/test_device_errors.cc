// What the device path refuses, and that a refusal leaves everything usable:
// host and device buffers mixed in one call or one group, a buffer of another
// GPU, capture into a CUDA Graph; and lanesCommCuDevice. Each test runs on one
// rank (a thread of this process) on GPU 0, so a refusal never strands a peer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "tests/gpu/gpu_harness.h"
#include "tests/multi/data.h"

namespace lanes::test {
namespace {

constexpr size_t kCount = 96;  // int32 elements per buffer (nranks is 1: no multiples)
constexpr size_t kBytes = kCount * sizeof(int32_t);

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// "" when `text` mentions every word (case-insensitive), else which is missing.
std::string missingWords(const std::string& text, std::initializer_list<const char*> words) {
  std::string l = lower(text);
  for (const char* w : words)
    if (l.find(lower(w)) == std::string::npos) return std::string("'") + w + "'";
  return "";
}

std::vector<int32_t> iota(int32_t from) {
  std::vector<int32_t> v(kCount);
  for (size_t i = 0; i < kCount; ++i) v[i] = from + static_cast<int32_t>(i);
  return v;
}

// Pinned host memory (CUDA knows it, but it is still host memory).
struct PinnedFree {
  void operator()(void* p) const { cudaFreeHost(p); }
};
using PinnedPtr = std::unique_ptr<void, PinnedFree>;
PinnedPtr pinnedAlloc(size_t bytes) {
  void* p = nullptr;
  GPU_CHECK_CUDA(cudaMallocHost(&p, bytes));
  return PinnedPtr(p);
}

// One all-reduce on device buffers after the refusals: the communicator and
// the stream must still work, and the result (one rank: a copy) be right.
void expectDeviceAllReduceWorks(GpuRank& self, const char* after) {
  DeviceBuffer send(kBytes, self.stream), recv(kBytes, self.stream);
  std::vector<int32_t> in = iota(1000);
  send.upload(in.data(), kBytes);
  recv.fill(0);
  GPU_CHECK_LANES(lanesAllReduce(send.data(), recv.data(), kCount, lanesInt32, lanesSum, self.comm,
                                 self.stream),
                  self.comm);
  std::string guards;
  std::vector<std::byte> out = recv.download(&guards);
  GPU_CHECK(guards.empty(), "after %s: %s", after, guards.c_str());
  GPU_CHECK(std::memcmp(out.data(), in.data(), kBytes) == 0,
            "after %s, a device all-reduce on one rank did not copy its input", after);
}

// A call of one collective with root 0, buffers of kCount elements.
struct CollCall {
  const char* name;
  std::function<lanesResult_t(const void* send, void* recv, lanesComm_t, cudaStream_t)> call;
};

std::vector<CollCall> everyCollective() {
  const size_t n = kCount;
  const lanesDataType_t t = lanesInt32;
  return {
      {"lanesAllReduce",
       [=](const void* s, void* r, lanesComm_t c, cudaStream_t st) {
         return lanesAllReduce(s, r, n, t, lanesSum, c, st);
       }},
      {"lanesBroadcast", [=](const void* s, void* r, lanesComm_t c,
                             cudaStream_t st) { return lanesBroadcast(s, r, n, t, 0, c, st); }},
      {"lanesReduce", [=](const void* s, void* r, lanesComm_t c,
                          cudaStream_t st) { return lanesReduce(s, r, n, t, lanesMax, 0, c, st); }},
      {"lanesAllGather", [=](const void* s, void* r, lanesComm_t c,
                             cudaStream_t st) { return lanesAllGather(s, r, n, t, c, st); }},
      {"lanesReduceScatter",
       [=](const void* s, void* r, lanesComm_t c, cudaStream_t st) {
         return lanesReduceScatter(s, r, n, t, lanesSum, c, st);
       }},
      {"lanesAlltoAll", [=](const void* s, void* r, lanesComm_t c,
                            cudaStream_t st) { return lanesAlltoAll(s, r, n, t, c, st); }},
      {"lanesGather", [=](const void* s, void* r, lanesComm_t c,
                          cudaStream_t st) { return lanesGather(s, r, n, t, 0, c, st); }},
      {"lanesScatter", [=](const void* s, void* r, lanesComm_t c,
                           cudaStream_t st) { return lanesScatter(s, r, n, t, 0, c, st); }},
  };
}

// Host send + device recv, and device send + host recv, with pageable and
// pinned host memory, for every collective: lanesInvalidArgument, a sentence
// naming host and device memory, and nothing written anywhere.
TEST(DeviceErrors, HostAndDeviceBufferInOneCall) {
  GPU_SKIP_UNLESS_GPU_HERE();
  runGpuThreads(1, [](GpuRank& self) {
    DeviceBuffer dev(kBytes, self.stream);
    const std::vector<int32_t> devContent = iota(-500);
    dev.upload(devContent.data(), kBytes);
    std::vector<int32_t> pageable = iota(7);
    PinnedPtr pinned = pinnedAlloc(kBytes);
    std::memcpy(pinned.get(), pageable.data(), kBytes);
    const std::vector<int32_t> hostContent = pageable;
    struct Host {
      const char* kind;
      void* ptr;
    };
    for (const Host& host : {Host{"pageable", pageable.data()}, Host{"pinned", pinned.get()}}) {
      for (const CollCall& c : everyCollective()) {
        for (bool hostSend : {true, false}) {
          const void* send = hostSend ? host.ptr : static_cast<void*>(dev.data());
          void* recv = hostSend ? static_cast<void*>(dev.data()) : host.ptr;
          const char* what = hostSend ? "host (%s) sendbuff + device recvbuff"
                                      : "device sendbuff + host (%s) recvbuff";
          std::string label = std::string(c.name) + ": " + strprintf(what, host.kind);
          lanesResult_t res = c.call(send, recv, self.comm, self.stream);
          GPU_CHECK(res == lanesInvalidArgument,
                    "%s returned %d (%s), expected lanesInvalidArgument", label.c_str(), res,
                    lanesGetErrorString(res));
          std::string text = lanesGetLastError(self.comm);
          std::string missing = missingWords(text, {"host", "device"});
          GPU_CHECK(missing.empty(), "%s: lanesGetLastError does not mention %s: \"%s\"",
                    label.c_str(), missing.c_str(), text.c_str());
          // Refused at the API: nothing may have been enqueued or written.
          std::vector<std::byte> devNow = dev.download();
          GPU_CHECK(std::memcmp(devNow.data(), devContent.data(), kBytes) == 0,
                    "%s: the refused call changed the device buffer", label.c_str());
          GPU_CHECK(std::memcmp(host.ptr, hostContent.data(), kBytes) == 0,
                    "%s: the refused call changed the host buffer", label.c_str());
        }
      }
    }
    expectDeviceAllReduceWorks(self, "the refused mixed calls");
  });
}

// A group whose calls on one communicator mix host and device buffers is
// refused as a whole at lanesGroupEnd with lanesInvalidUsage, runs none of
// its calls, and leaves no group open.
TEST(DeviceErrors, HostAndDeviceBuffersInOneGroup) {
  GPU_SKIP_UNLESS_GPU_HERE();
  runGpuThreads(1, [](GpuRank& self) {
    lanesComm_t comm = self.comm;
    DeviceBuffer devSend(kBytes, self.stream), devRecv(kBytes, self.stream);
    const std::vector<int32_t> sendContent = iota(11), recvContent = iota(-77);
    devSend.upload(sendContent.data(), kBytes);
    devRecv.upload(recvContent.data(), kBytes);
    std::vector<int32_t> hostSend = iota(300);
    std::vector<int32_t> hostRecv = iota(-9);
    const std::vector<int32_t> hostRecvBefore = hostRecv;

    struct Mix {
      const char* name;
      std::function<void()> enqueue;
    };
    const Mix mixes[] = {
        {"host lanesSend + device lanesRecv (to and from itself)",
         [&] {
           GPU_CHECK_LANES(lanesSend(hostSend.data(), kCount, lanesInt32, 0, comm, self.stream),
                           comm);
           GPU_CHECK_LANES(lanesRecv(devRecv.data(), kCount, lanesInt32, 0, comm, self.stream),
                           comm);
         }},
        {"device lanesSend + host lanesRecv (to and from itself)",
         [&] {
           GPU_CHECK_LANES(lanesSend(devSend.data(), kCount, lanesInt32, 0, comm, self.stream),
                           comm);
           GPU_CHECK_LANES(lanesRecv(hostRecv.data(), kCount, lanesInt32, 0, comm, self.stream),
                           comm);
         }},
        {"device lanesAllReduce + host lanesAllReduce",
         [&] {
           GPU_CHECK_LANES(lanesAllReduce(devSend.data(), devRecv.data(), kCount, lanesInt32,
                                          lanesSum, comm, self.stream),
                           comm);
           GPU_CHECK_LANES(lanesAllReduce(hostSend.data(), hostRecv.data(), kCount, lanesInt32,
                                          lanesSum, comm, self.stream),
                           comm);
         }},
    };
    for (const Mix& mix : mixes) {
      GPU_CHECK_LANES(lanesGroupStart(), comm);
      mix.enqueue();
      lanesResult_t res = lanesGroupEnd();
      GPU_CHECK(res == lanesInvalidUsage,
                "group of %s: lanesGroupEnd returned %d (%s), expected lanesInvalidUsage", mix.name,
                res, lanesGetErrorString(res));
      std::string text = lanesGetLastError(comm);
      std::string missing = missingWords(text, {"host", "device"});
      GPU_CHECK(missing.empty(), "group of %s: lanesGetLastError does not mention %s: \"%s\"",
                mix.name, missing.c_str(), text.c_str());
      std::vector<std::byte> now = devRecv.download();
      GPU_CHECK(std::memcmp(now.data(), recvContent.data(), kBytes) == 0,
                "group of %s: the refused group wrote the device recvbuff", mix.name);
      GPU_CHECK(hostRecv == hostRecvBefore,
                "group of %s: the refused group wrote the host recvbuff", mix.name);
    }
    // No group may be left open: a plain call must run at once.
    expectDeviceAllReduceWorks(self, "the refused mixed groups");
    // And a group of device calls only still runs.
    DeviceBuffer recv2(kBytes, self.stream);
    GPU_CHECK_LANES(lanesGroupStart(), comm);
    GPU_CHECK_LANES(lanesSend(devSend.data(), kCount, lanesInt32, 0, comm, self.stream), comm);
    GPU_CHECK_LANES(lanesRecv(recv2.data(), kCount, lanesInt32, 0, comm, self.stream), comm);
    GPU_CHECK_LANES(lanesGroupEnd(), comm);
    std::vector<std::byte> got = recv2.download();
    GPU_CHECK(std::memcmp(got.data(), sendContent.data(), kBytes) == 0,
              "a device send/recv to itself after the refused groups delivered wrong bytes");
  });
}

// A device buffer of another GPU than the communicator's is refused with
// lanesInvalidArgument naming both GPUs. Needs a second GPU.
TEST(DeviceErrors, BufferOnAnotherGpu) {
  GPU_SKIP_UNLESS_GPU_HERE();
  if (gpusVisibleHere() < 2) GTEST_SKIP() << "needs 2 CUDA devices (one is visible)";
  runGpuThreads(1, [](GpuRank& self) {
    // One rank: device-wide synchronisation in cudaMalloc/cudaFree strands nobody.
    GPU_CHECK_CUDA(cudaSetDevice(1));
    void* other = nullptr;
    GPU_CHECK_CUDA(cudaMalloc(&other, kBytes));
    GPU_CHECK_CUDA(cudaMemset(other, 0x3c, kBytes));
    GPU_CHECK_CUDA(cudaDeviceSynchronize());
    GPU_CHECK_CUDA(cudaSetDevice(0));
    struct Freer {
      void* p;
      ~Freer() {
        cudaSetDevice(1);
        cudaFree(p);
        cudaSetDevice(0);
      }
    } freer{other};
    DeviceBuffer mine(kBytes, self.stream);
    mine.fill(0);
    auto expectRefused = [&](const char* what, lanesResult_t res) {
      GPU_CHECK(res == lanesInvalidArgument, "%s returned %d (%s), expected lanesInvalidArgument",
                what, res, lanesGetErrorString(res));
      std::string text = lanesGetLastError(self.comm);
      std::string missing = missingWords(text, {"GPU 1", "GPU 0"});
      GPU_CHECK(missing.empty(), "%s: lanesGetLastError does not mention %s: \"%s\"", what,
                missing.c_str(), text.c_str());
    };
    for (const CollCall& c : everyCollective()) {
      expectRefused((std::string(c.name) + " with sendbuff on GPU 1").c_str(),
                    c.call(other, mine.data(), self.comm, self.stream));
      expectRefused((std::string(c.name) + " with recvbuff on GPU 1").c_str(),
                    c.call(mine.data(), other, self.comm, self.stream));
    }
    GPU_CHECK_LANES(lanesGroupStart(), self.comm);
    lanesResult_t send = lanesSend(other, kCount, lanesInt32, 0, self.comm, self.stream);
    lanesResult_t recv = lanesRecv(other, kCount, lanesInt32, 0, self.comm, self.stream);
    GPU_CHECK_LANES(lanesGroupEnd(), self.comm);  // nothing was queued: an empty group
    expectRefused("lanesSend from GPU 1", send);
    expectRefused("lanesRecv into GPU 1", recv);
    std::vector<std::byte> now = mine.download();
    GPU_CHECK(std::all_of(now.begin(), now.end(), [](std::byte b) { return b == std::byte{0}; }),
              "a refused call wrote the communicator's own buffer");
    expectDeviceAllReduceWorks(self, "the refused other-GPU calls");
  });
}

// Capturing a device collective into a CUDA Graph is refused with
// lanesInvalidUsage naming the graph, the capture itself stays valid (ending it
// succeeds), and the stream then runs collectives normally. Round 0 captures
// on a communicator that has not used its GPU yet, round 1 after it has.
void expectCaptureRefused(cudaStreamCaptureMode mode, const char* modeName) {
  GPU_SKIP_UNLESS_GPU_HERE();
  runGpuThreads(1, [mode, modeName](GpuRank& self) {
    DeviceBuffer send(kBytes, self.stream), recv(kBytes, self.stream);
    std::vector<int32_t> in = iota(42);
    send.upload(in.data(), kBytes);
    recv.fill(0);
    syncStream(self.stream);  // allocation and upload done before capture begins
    for (int round = 0; round < 2; ++round) {
      struct Attempt {
        const char* what;
        std::function<lanesResult_t()> call;
      };
      const Attempt attempts[] = {
          {"lanesAllReduce",
           [&] {
             return lanesAllReduce(send.data(), recv.data(), kCount, lanesInt32, lanesSum,
                                   self.comm, self.stream);
           }},
          {"a group of lanesSend + lanesRecv",
           [&] {
             lanesGroupStart();
             lanesResult_t s =
                 lanesSend(send.data(), kCount, lanesInt32, 0, self.comm, self.stream);
             lanesResult_t r =
                 lanesRecv(recv.data(), kCount, lanesInt32, 0, self.comm, self.stream);
             lanesResult_t g = lanesGroupEnd();
             return s != lanesSuccess ? s : r != lanesSuccess ? r : g;
           }},
      };
      for (const Attempt& a : attempts) {
        std::string label = strprintf("round %d, %s capture: %s", round, modeName, a.what);
        GPU_CHECK_CUDA(cudaStreamBeginCapture(self.stream, mode));
        lanesResult_t res = a.call();
        std::string text = lanesGetLastError(self.comm);
        cudaGraph_t graph = nullptr;
        cudaError_t end = cudaStreamEndCapture(self.stream, &graph);
        if (graph != nullptr) cudaGraphDestroy(graph);
        GPU_CHECK(res == lanesInvalidUsage, "%s returned %d (%s), expected lanesInvalidUsage",
                  label.c_str(), res, lanesGetErrorString(res));
        std::string missing = missingWords(text, {"graph"});
        GPU_CHECK(missing.empty(), "%s: lanesGetLastError does not mention %s: \"%s\"",
                  label.c_str(), missing.c_str(), text.c_str());
        GPU_CHECK(end == cudaSuccess,
                  "%s: cudaStreamEndCapture failed with %s after the refusal (the library's calls "
                  "invalidated the capture)",
                  label.c_str(), cudaGetErrorString(end));
        cudaStreamCaptureStatus status = cudaStreamCaptureStatusActive;
        GPU_CHECK_CUDA(cudaStreamIsCapturing(self.stream, &status));
        GPU_CHECK(status == cudaStreamCaptureStatusNone, "%s: the stream is still capturing",
                  label.c_str());
        cudaError_t pending = cudaGetLastError();
        GPU_CHECK(pending == cudaSuccess, "%s: the refusal left a pending CUDA error: %s",
                  label.c_str(), cudaGetErrorString(pending));
      }
      // The stream and the communicator still work (round 0 also creates the
      // communicator's device state now, for round 1 to capture against).
      expectDeviceAllReduceWorks(self, strprintf("refused %s captures", modeName).c_str());
    }
  });
}

// The small-message (LL) path captures all-reduce correctly (tests/gpu/test_ll_*);
// the refusal is a property of the staged and proxy paths, so LL and simple are off here.
TEST(DeviceErrors, GraphCaptureRefusedRelaxedMode) {
  setenv("LANES_PROTO", "^ll,simple", 1);
  expectCaptureRefused(cudaStreamCaptureModeRelaxed, "relaxed");
}

// PyTorch captures in global mode (its default): the refusal must not make a
// call that global mode forbids, or it would invalidate the user's capture.
TEST(DeviceErrors, GraphCaptureRefusedGlobalMode) {
  setenv("LANES_PROTO", "^ll,simple", 1);
  expectCaptureRefused(cudaStreamCaptureModeGlobal, "global");
}

// lanesCommCuDevice reports the device that was current when the
// communicator was made (through every init entry point), not the one current
// when it is asked.
TEST(DeviceErrors, CommCuDeviceIsTheDeviceCurrentAtInit) {
  GPU_SKIP_UNLESS_GPU_HERE();
  const int last = gpusVisibleHere() - 1;
  runGpuThreads(1, [last](GpuRank& self) {
    int dev = -2;
    GPU_CHECK_LANES(lanesCommCuDevice(self.comm, &dev), self.comm);
    GPU_CHECK(dev == 0, "lanesCommInitAll with devlist {0}: lanesCommCuDevice says %d", dev);

    // lanesCommInitRankConfig takes the calling thread's current device.
    GPU_CHECK_CUDA(cudaSetDevice(last));
    lanesUniqueId id;
    GPU_CHECK_LANES(lanesGetUniqueId(&id), nullptr);
    lanesConfig_t config = LANES_CONFIG_INITIALIZER;
    config.timeoutSeconds = rankTimeoutSeconds();
    lanesComm_t single = nullptr;
    GPU_CHECK_LANES(lanesCommInitRankConfig(&single, 1, id, 0, &config), nullptr);
    CommGuard singleGuard(single);
    GPU_CHECK_CUDA(cudaSetDevice(0));  // what is current later does not matter
    GPU_CHECK_LANES(lanesCommCuDevice(single, &dev), single);
    GPU_CHECK(dev == last, "lanesCommInitRankConfig with GPU %d current: lanesCommCuDevice says %d",
              last, dev);

    // lanesCommInitAll makes each listed device current for its rank.
    const int devlist[2] = {last, 0};
    lanesComm_t pair[2] = {nullptr, nullptr};
    GPU_CHECK_LANES(lanesCommInitAll(pair, 2, devlist), nullptr);
    CommGuard g0(pair[0]), g1(pair[1]);
    for (int r = 0; r < 2; ++r) {
      GPU_CHECK_LANES(lanesCommCuDevice(pair[r], &dev), pair[r]);
      GPU_CHECK(dev == devlist[r], "lanesCommInitAll rank %d on GPU %d: lanesCommCuDevice says %d",
                r, devlist[r], dev);
    }
    int current = -1;
    GPU_CHECK_CUDA(cudaGetDevice(&current));
    GPU_CHECK(current == 0, "lanesCommInitAll changed the caller's current device to %d", current);
  });
}

}  // namespace
}  // namespace lanes::test
