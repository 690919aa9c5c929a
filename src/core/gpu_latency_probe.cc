#include "core/gpu_latency_probe.h"

#if LANES_HAVE_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "base/cuda_bounded_wait.h"
#include "base/cuda_check.h"
#include "base/log.h"
#include "exec/cuda/stream_memops.h"
#include "kernels/cuda/stream_flags.h"
#include "topology/probe.h"
#endif

namespace lanes {

#if LANES_HAVE_CUDA
namespace {

// The ping-pong is fed while its first stream waits at a gate, so the host's
// issue rate stays out of the figure; a batch is small enough that feeding it
// never fills a stream's queue, which would block the host with the gate shut.
constexpr int kRoundsPerBatch = 64;
constexpr int kBatches = 32;  // 2048 rounds, after one batch of warm-up
constexpr int kLaunches = 2000;
constexpr int kLaunchRounds = 3;  // best of, after one of warm-up

// Each counter on its own 64-byte line of one mapped page.
enum Flag { kGate = 0, kPing = 16, kPong = 32, kLaunched = 48 };

// One GPU's streams, events and counters. On an error a stream may still be
// parked on a counter: the counters are then opened and left allocated.
struct Rig {
  cudaStream_t a = nullptr, b = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  volatile uint32_t* flags = nullptr;
  bool settled = false;

  Status init() {
    void* p = nullptr;
    LANES_CUDA_RETURN(cudaHostAlloc(&p, 4096, cudaHostAllocMapped | cudaHostAllocPortable));
    flags = static_cast<volatile uint32_t*>(p);
    for (int i = 0; i < 1024; ++i) flags[i] = 0;
    LANES_CUDA_RETURN(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    LANES_CUDA_RETURN(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    LANES_CUDA_RETURN(cudaEventCreate(&start));
    LANES_CUDA_RETURN(cudaEventCreate(&stop));
    return Status::ok();
  }
  ~Rig() {
    if (!settled && flags != nullptr) {
      for (Flag f : {kGate, kPing, kPong}) __atomic_store_n(&flags[f], 1u << 30, __ATOMIC_RELEASE);
      return;
    }
    for (cudaEvent_t e : {start, stop})
      if (e) cudaEventDestroy(e);
    for (cudaStream_t s : {a, b})
      if (s) cudaStreamDestroy(s);
    if (flags) cudaFreeHost(const_cast<uint32_t*>(flags));
  }
};

// Stream a writes ping = i, then waits for pong >= i; stream b waits for
// ping >= i, then writes pong = i. Microseconds per one-way hop.
Status flagHop(const StreamMemops& ops, Rig& r, double* us) {
  volatile uint32_t* gate = &r.flags[kGate];
  volatile uint32_t* ping = &r.flags[kPing];
  volatile uint32_t* pong = &r.flags[kPong];
  uint32_t value = 0;
  double totalMs = 0;
  for (int batch = 0; batch <= kBatches; ++batch) {
    const uint32_t open = static_cast<uint32_t>(batch + 1);
    LANES_RETURN_IF_ERROR(ops.waitGeq(r.a, gate, open));
    LANES_CUDA_RETURN(cudaEventRecord(r.start, r.a));
    for (int i = 0; i < kRoundsPerBatch; ++i) {
      ++value;
      LANES_RETURN_IF_ERROR(ops.write(r.a, ping, value));
      LANES_RETURN_IF_ERROR(ops.waitGeq(r.a, pong, value));
      LANES_RETURN_IF_ERROR(ops.waitGeq(r.b, ping, value));
      LANES_RETURN_IF_ERROR(ops.write(r.b, pong, value));
    }
    LANES_CUDA_RETURN(cudaEventRecord(r.stop, r.a));
    __atomic_store_n(gate, open, __ATOMIC_RELEASE);
    LANES_RETURN_IF_ERROR(
        waitStreamFor(r.a, topo::kProbeStepSeconds, "the stream flag probe's ping stream"));
    LANES_RETURN_IF_ERROR(
        waitStreamFor(r.b, topo::kProbeStepSeconds, "the stream flag probe's pong stream"));
    float ms = 0;
    LANES_CUDA_RETURN(cudaEventElapsedTime(&ms, r.start, r.stop));
    if (batch > 0) totalMs += ms;
  }
  *us = totalMs * 1e3 / (2.0 * kBatches * kRoundsPerBatch);
  return Status::ok();
}

// One-thread kernels back to back on one stream, timed by events: the larger
// of the host's cost to issue one and the GPU's time to run one.
Status launchTime(Rig& r, double* us) {
  void* dev = nullptr;
  LANES_CUDA_RETURN(cudaHostGetDevicePointer(&dev, const_cast<uint32_t*>(&r.flags[kLaunched]), 0));
  auto* flag = static_cast<volatile uint32_t*>(dev);
  double bestMs = 1e30;
  for (int round = 0; round <= kLaunchRounds; ++round) {
    LANES_CUDA_RETURN(cudaEventRecord(r.start, r.a));
    for (int i = 0; i < kLaunches; ++i)
      LANES_RETURN_IF_ERROR(kernelStatus(cuda::launchWriteFlag(flag, static_cast<uint32_t>(i), r.a),
                                         "launching a flag kernel"));
    LANES_CUDA_RETURN(cudaEventRecord(r.stop, r.a));
    LANES_RETURN_IF_ERROR(
        waitEventFor(r.stop, topo::kProbeStepSeconds, "the launch probe's flag kernels"));
    float ms = 0;
    LANES_CUDA_RETURN(cudaEventElapsedTime(&ms, r.start, r.stop));
    if (round > 0) bestMs = std::min(bestMs, static_cast<double>(ms));
  }
  *us = bestMs * 1e3 / kLaunches;
  return Status::ok();
}

Status measureOn(int device, const StreamMemops& ops, topo::GpuProbe* g) {
  LANES_CUDA_RETURN(cudaSetDevice(device));
  Rig r;
  LANES_RETURN_IF_ERROR(r.init());
  LANES_RETURN_IF_ERROR(flagHop(ops, r, &g->flagUs));
  LANES_RETURN_IF_ERROR(launchTime(r, &g->launchUs));
  r.settled = true;
  return Status::ok();
}

}  // namespace

Status measureGpuLatencies(topo::Topology* t) {
  const StreamMemops* ops = nullptr;
  LANES_RETURN_IF_ERROR(StreamMemops::get(&ops));
  int prev = 0;
  cudaGetDevice(&prev);
  Status status;
  for (topo::GpuProbe& g : t->probes.gpus) {
    if (g.gpu < 0 || g.gpu >= static_cast<int>(t->gpus.size())) continue;
    const int device = t->gpus[g.gpu].cudaIndex;
    if (device < 0) continue;
    status = measureOn(device, *ops, &g);
    if (!status) break;
    LANES_INFO(Topo, -1, "probe GPU%d: stream flag %.2f us one way (%s), kernel launch %.2f us",
               g.gpu, g.flagUs, ops->usesDriver() ? "stream memory operations" : "flag kernels",
               g.launchUs);
  }
  cudaSetDevice(prev);
  return status;
}

#else

Status measureGpuLatencies(topo::Topology*) { return Status::ok(); }

#endif

}  // namespace lanes
