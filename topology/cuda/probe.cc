// The probes: cudaMemcpyAsync between pinned host memory and the GPU, timed
// with events, best of several repetitions (at one large size, and by copy
// size back to back on one stream); P2P checked by a pattern written on one
// GPU, copied peer-to-peer and read back from the other.
#include "topology/probe.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/cuda_bounded_wait.h"
#include "base/cuda_check.h"
#include "base/log.h"

namespace lanes::topo {

namespace {

struct DevMem {
  void* p = nullptr;
  ~DevMem() {
    if (p) cudaFree(p);
  }
};
struct HostMem {
  void* p = nullptr;
  ~HostMem() {
    if (p) cudaFreeHost(p);
  }
};
struct Stream {
  cudaStream_t s = nullptr;
  ~Stream() {
    if (s) cudaStreamDestroy(s);
  }
};
struct Event {
  cudaEvent_t e = nullptr;
  ~Event() {
    if (e) cudaEventDestroy(e);
  }
};

// The copy curves: sizes 4 KiB x 4^i (HostProbe's), each timed over at least
// 64 MiB and 16 copies, unless a round would outlast kCurveRoundSeconds: 16
// points, a warm-up and 3 rounds each keep both curves under about a second.
constexpr size_t kCurveFirstBytes = size_t{4} << 10;
constexpr size_t kCurveLastBytes = kCurveFirstBytes << (2 * (HostProbe::kCurvePoints - 1));
constexpr size_t kCurveRoundBytes = size_t{64} << 20;
constexpr size_t kCurveMinCopies = 16, kCurveFloorCopies = 4;
constexpr double kCurveRoundSeconds = 0.016;
constexpr int kCurveRounds = 3;

// Everything one GPU's probes use, allocated on that GPU.
struct GpuRig {
  int dev = -1;
  size_t capacity = 0;  // of each buffer
  DevMem a, b;
  HostMem up, down;
  Stream s0, s1;
  Event start, stop0, stop1;

  // After a step timed out its copies may still run: cudaFree and cudaFreeHost
  // would wait for them, so the rig's memory, streams and events are left
  // allocated (the process is on a hung GPU; a leak beats a hang).
  void abandon() {
    a.p = b.p = up.p = down.p = nullptr;
    s0.s = s1.s = nullptr;
    start.e = stop0.e = stop1.e = nullptr;
  }

  Status init(int device, size_t bytes) {
    dev = device;
    bytes = std::max(bytes, kCurveLastBytes);
    capacity = bytes;
    LANES_CUDA_RETURN(cudaSetDevice(dev));
    LANES_CUDA_RETURN(cudaMalloc(&a.p, bytes));
    LANES_CUDA_RETURN(cudaMalloc(&b.p, bytes));
    LANES_CUDA_RETURN(cudaMallocHost(&up.p, bytes));
    LANES_CUDA_RETURN(cudaMallocHost(&down.p, bytes));
    std::memset(up.p, 0x5a, bytes);  // touch every page before timing
    std::memset(down.p, 0, bytes);
    LANES_CUDA_RETURN(cudaStreamCreateWithFlags(&s0.s, cudaStreamNonBlocking));
    LANES_CUDA_RETURN(cudaStreamCreateWithFlags(&s1.s, cudaStreamNonBlocking));
    for (Event* e : {&start, &stop0, &stop1}) LANES_CUDA_RETURN(cudaEventCreate(&e->e));
    return Status::ok();
  }
  // One timed round: H2D on s0 (when h2d), D2H on s1 (when d2h), both from
  // one start event. Seconds until the later copy ended.
  Status round(bool h2d, bool d2h, size_t bytes, double* seconds) {
    LANES_CUDA_RETURN(cudaSetDevice(dev));
    LANES_CUDA_RETURN(cudaEventRecord(start.e, s0.s));
    LANES_CUDA_RETURN(cudaStreamWaitEvent(s1.s, start.e, 0));
    if (h2d) LANES_CUDA_RETURN(cudaMemcpyAsync(a.p, up.p, bytes, cudaMemcpyHostToDevice, s0.s));
    if (d2h) LANES_CUDA_RETURN(cudaMemcpyAsync(down.p, b.p, bytes, cudaMemcpyDeviceToHost, s1.s));
    LANES_CUDA_RETURN(cudaEventRecord(stop0.e, s0.s));
    LANES_CUDA_RETURN(cudaEventRecord(stop1.e, s1.s));
    LANES_RETURN_IF_ERROR(waitEventFor(stop0.e, kProbeStepSeconds, "the probe's copy to the GPU"));
    LANES_RETURN_IF_ERROR(
        waitEventFor(stop1.e, kProbeStepSeconds, "the probe's copy from the GPU"));
    float ms0 = 0, ms1 = 0;
    LANES_CUDA_RETURN(cudaEventElapsedTime(&ms0, start.e, stop0.e));
    LANES_CUDA_RETURN(cudaEventElapsedTime(&ms1, start.e, stop1.e));
    *seconds = std::max(ms0, ms1) / 1e3;
    return Status::ok();
  }
  // Best GB/s over `reps` rounds (after one untimed warm-up).
  Status best(bool h2d, bool d2h, size_t bytes, int reps, double* gbps) {
    double s = 0, bestS = 1e30;
    LANES_RETURN_IF_ERROR(round(h2d, d2h, bytes, &s));
    for (int r = 0; r < reps; ++r) {
      LANES_RETURN_IF_ERROR(round(h2d, d2h, bytes, &s));
      bestS = std::min(bestS, s);
    }
    *gbps = (h2d && d2h ? 2.0 : 1.0) * static_cast<double>(bytes) / bestS / 1e9;
    return Status::ok();
  }
  // `count` copies of `size` bytes of `kind` (H2D, D2H, or D2D within the
  // GPU) back to back on s0, walking the buffers so that consecutive copies
  // touch different memory; seconds for all.
  Status copies(cudaMemcpyKind kind, size_t size, size_t count, double* seconds) {
    LANES_CUDA_RETURN(cudaSetDevice(dev));
    const size_t slots = capacity / size;
    char* to = static_cast<char*>(kind == cudaMemcpyDeviceToHost ? down.p : a.p);
    const char* from = static_cast<const char*>(kind == cudaMemcpyHostToDevice ? up.p : b.p);
    LANES_CUDA_RETURN(cudaEventRecord(start.e, s0.s));
    for (size_t i = 0; i < count; ++i) {
      const size_t at = (i % slots) * size;
      LANES_CUDA_RETURN(cudaMemcpyAsync(to + at, from + at, size, kind, s0.s));
    }
    LANES_CUDA_RETURN(cudaEventRecord(stop0.e, s0.s));
    LANES_RETURN_IF_ERROR(waitEventFor(stop0.e, kProbeStepSeconds, "the probe's copies by size"));
    float ms = 0;
    LANES_CUDA_RETURN(cudaEventElapsedTime(&ms, start.e, stop0.e));
    *seconds = ms / 1e3;
    return Status::ok();
  }
  // GB/s by copy size, kCurvePoints sizes from kCurveFirstBytes. The warm-up
  // (at most 64 copies, 64 MiB) also paces the timed rounds.
  Status curve(cudaMemcpyKind kind, std::vector<double>* gbps) {
    gbps->clear();
    for (int i = 0; i < HostProbe::kCurvePoints; ++i) {
      const size_t size = kCurveFirstBytes << (2 * i);
      size_t count = std::max(kCurveMinCopies, kCurveRoundBytes / size);
      const size_t warm = std::clamp<size_t>(kCurveRoundBytes / size, 1, 64);
      double s = 0;
      LANES_RETURN_IF_ERROR(copies(kind, size, warm, &s));
      const double perCopy = std::max(s / static_cast<double>(warm), 1e-9);
      count = std::min(
          count, std::max(kCurveFloorCopies, static_cast<size_t>(kCurveRoundSeconds / perCopy)));
      double bestS = 1e30;
      for (int r = 0; r < kCurveRounds; ++r) {
        LANES_RETURN_IF_ERROR(copies(kind, size, count, &s));
        bestS = std::min(bestS, s);
      }
      gbps->push_back(static_cast<double>(count * size) / bestS / 1e9);
    }
    return Status::ok();
  }
};

std::string curveText(const std::vector<double>& gbps) {
  std::string out;
  char buf[32];
  for (double v : gbps) {
    snprintf(buf, sizeof(buf), out.empty() ? "%.3g" : " %.3g", v);
    out += buf;
  }
  return out;
}

// All GPUs copy at once; wall time from issue to the last completion.
Status allAtOnce(std::vector<std::unique_ptr<GpuRig>>& rigs, bool h2d, size_t bytes, int reps,
                 double* gbps) {
  double bestS = 1e30;
  for (int r = 0; r <= reps; ++r) {
    // Idle all first, so the start is common. Only the probe's own streams:
    // a device-wide wait would also wait for a caller's parked streams.
    for (auto& g : rigs) {
      LANES_CUDA_RETURN(cudaSetDevice(g->dev));
      LANES_RETURN_IF_ERROR(waitStreamFor(g->s0.s, kProbeStepSeconds, "the probe's copy stream"));
      LANES_RETURN_IF_ERROR(waitStreamFor(g->s1.s, kProbeStepSeconds, "the probe's copy stream"));
    }
    auto t0 = std::chrono::steady_clock::now();
    for (auto& g : rigs) {
      LANES_CUDA_RETURN(cudaSetDevice(g->dev));
      if (h2d)
        LANES_CUDA_RETURN(cudaMemcpyAsync(g->a.p, g->up.p, bytes, cudaMemcpyHostToDevice, g->s0.s));
      else
        LANES_CUDA_RETURN(
            cudaMemcpyAsync(g->down.p, g->b.p, bytes, cudaMemcpyDeviceToHost, g->s0.s));
    }
    for (auto& g : rigs) {
      LANES_CUDA_RETURN(cudaSetDevice(g->dev));
      LANES_RETURN_IF_ERROR(
          waitStreamFor(g->s0.s, kProbeStepSeconds, "the probe's copies of all GPUs at once"));
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) bestS = std::min(bestS, s);  // round 0 warms up
  }
  *gbps = static_cast<double>(bytes) * rigs.size() / bestS / 1e9;
  return Status::ok();
}

uint32_t patternWord(size_t i, int a, int b) {
  return static_cast<uint32_t>(i * 2654435761u) ^ static_cast<uint32_t>(a * 131 + b * 7 + 1);
}

// Pattern from rig x's device to rig y's device by cudaMemcpyPeerAsync, read
// back and compared; then timed.
Status probePair(GpuRig& x, GpuRig& y, size_t bytes, int reps, PairProbe* out) {
  LANES_CUDA_RETURN(cudaSetDevice(x.dev));
  cudaError_t e = cudaDeviceEnablePeerAccess(y.dev, 0);
  if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) LANES_CUDA_RETURN(e);
  cudaGetLastError();
  auto* words = static_cast<uint32_t*>(x.up.p);
  size_t n = bytes / 4;
  for (size_t i = 0; i < n; ++i) words[i] = patternWord(i, x.dev, y.dev);
  LANES_CUDA_RETURN(cudaMemcpyAsync(x.a.p, x.up.p, bytes, cudaMemcpyHostToDevice, x.s0.s));
  LANES_RETURN_IF_ERROR(waitStreamFor(x.s0.s, kProbeStepSeconds, "the P2P probe's upload"));
  LANES_CUDA_RETURN(cudaSetDevice(y.dev));
  LANES_CUDA_RETURN(cudaMemsetAsync(y.b.p, 0, bytes, y.s0.s));
  LANES_RETURN_IF_ERROR(waitStreamFor(y.s0.s, kProbeStepSeconds, "the P2P probe's clearing"));
  LANES_CUDA_RETURN(cudaSetDevice(x.dev));
  LANES_CUDA_RETURN(cudaMemcpyPeerAsync(y.b.p, y.dev, x.a.p, x.dev, bytes, x.s0.s));
  LANES_RETURN_IF_ERROR(waitStreamFor(x.s0.s, kProbeStepSeconds, "the P2P probe's peer copy"));
  LANES_CUDA_RETURN(cudaSetDevice(y.dev));
  LANES_CUDA_RETURN(cudaMemcpyAsync(y.down.p, y.b.p, bytes, cudaMemcpyDeviceToHost, y.s0.s));
  LANES_RETURN_IF_ERROR(waitStreamFor(y.s0.s, kProbeStepSeconds, "the P2P probe's download"));
  const auto* got = static_cast<const uint32_t*>(y.down.p);
  out->tested = true;
  out->correct = true;
  for (size_t i = 0; i < n; ++i) {
    if (got[i] != patternWord(i, x.dev, y.dev)) {
      out->correct = false;
      out->error = "pattern mismatch at byte " + std::to_string(i * 4);
      return Status::ok();
    }
  }
  LANES_CUDA_RETURN(cudaSetDevice(x.dev));
  double bestS = 1e30;
  for (int r = 0; r <= reps; ++r) {
    LANES_CUDA_RETURN(cudaEventRecord(x.start.e, x.s0.s));
    LANES_CUDA_RETURN(cudaMemcpyPeerAsync(y.b.p, y.dev, x.a.p, x.dev, bytes, x.s0.s));
    LANES_CUDA_RETURN(cudaEventRecord(x.stop0.e, x.s0.s));
    LANES_RETURN_IF_ERROR(waitEventFor(x.stop0.e, kProbeStepSeconds, "the P2P probe's peer copy"));
    float ms = 0;
    LANES_CUDA_RETURN(cudaEventElapsedTime(&ms, x.start.e, x.stop0.e));
    if (r > 0) bestS = std::min(bestS, ms / 1e3);
  }
  out->gbps = static_cast<double>(bytes) / bestS / 1e9;
  return Status::ok();
}

// Every GPU's copies, all at once, then the pairs, into `p`; the rigs stay
// the caller's to free or abandon.
Status measureRigs(const ProbeOptions& o, const Topology& t, const std::vector<int>& gpus,
                   std::vector<std::unique_ptr<GpuRig>>& rigs, Probes* p) {
  for (int g : gpus) {
    rigs.push_back(std::make_unique<GpuRig>());
    LANES_RETURN_IF_ERROR(rigs.back()->init(t.gpus[g].cudaIndex, o.bytes));
    GpuProbe r;
    r.gpu = g;
    LANES_RETURN_IF_ERROR(rigs.back()->best(true, false, o.bytes, o.repetitions, &r.h2d));
    LANES_RETURN_IF_ERROR(rigs.back()->best(false, true, o.bytes, o.repetitions, &r.d2h));
    LANES_RETURN_IF_ERROR(rigs.back()->best(true, true, o.bytes, o.repetitions, &r.bidir));
    LANES_INFO(Topo, -1, "probe GPU%d: H2D %.1f D2H %.1f both-ways %.1f GB/s", g, r.h2d, r.d2h,
               r.bidir);
    LANES_RETURN_IF_ERROR(rigs.back()->curve(cudaMemcpyHostToDevice, &r.h2dCurve));
    LANES_RETURN_IF_ERROR(rigs.back()->curve(cudaMemcpyDeviceToHost, &r.d2hCurve));
    LANES_RETURN_IF_ERROR(rigs.back()->curve(cudaMemcpyDeviceToDevice, &r.d2dCurve));
    LANES_INFO(Topo, -1, "probe GPU%d: copies 4 KiB..64 MiB H2D %s, D2H %s, within the GPU %s GB/s",
               g, curveText(r.h2dCurve).c_str(), curveText(r.d2hCurve).c_str(),
               curveText(r.d2dCurve).c_str());
    p->gpus.push_back(r);
  }
  if (o.onlyCudaDevice < 0) {  // one GPU alone says nothing of a shared root port
    LANES_RETURN_IF_ERROR(allAtOnce(rigs, true, o.bytes, o.repetitions, &p->allH2d));
    LANES_RETURN_IF_ERROR(allAtOnce(rigs, false, o.bytes, o.repetitions, &p->allD2h));
  }
  for (size_t i = 0; o.pairs && i < rigs.size(); ++i) {
    for (size_t j = 0; j < rigs.size(); ++j) {
      if (i == j) continue;
      PairProbe q;
      q.a = gpus[i];
      q.b = gpus[j];
      int can = 0;
      cudaDeviceCanAccessPeer(&can, rigs[i]->dev, rigs[j]->dev);
      q.advertised = can != 0;
      if (q.advertised) {
        Status s = probePair(*rigs[i], *rigs[j], o.bytes, o.repetitions, &q);
        if (!s) {
          q.tested = true;
          q.correct = false;
          q.error = s.message();
          cudaGetLastError();
        }
        // A peer copy that never finished: the pair says so, no more pairs,
        // and the GPUs' figures stand.
        if (s.code() == lanesTimeout) {
          p->pairs.push_back(q);
          return s;
        }
      }
      p->pairs.push_back(q);
    }
  }
  return Status::ok();
}

}  // namespace

Status runProbes(const ProbeOptions& o, Topology* t) {
  std::vector<int> gpus;  // model indices of CUDA-visible GPUs
  for (size_t i = 0; i < t->gpus.size(); ++i)
    if (t->gpus[i].cudaIndex >= 0 &&
        (o.onlyCudaDevice < 0 || t->gpus[i].cudaIndex == o.onlyCudaDevice))
      gpus.push_back(static_cast<int>(i));
  if (gpus.empty())
    return invalidUsage(o.onlyCudaDevice < 0 ? "no GPU visible to CUDA: nothing to probe"
                                             : "CUDA device " + std::to_string(o.onlyCudaDevice) +
                                                   " is not in the topology: nothing to probe");
  int prev = 0;
  cudaGetDevice(&prev);
  Probes p;
  std::vector<std::unique_ptr<GpuRig>> rigs;
  const Status s = measureRigs(o, *t, gpus, rigs, &p);
  const bool timedOut = s.code() == lanesTimeout;
  if (timedOut)
    for (auto& r : rigs) r->abandon();
  cudaSetDevice(prev);
  // A hung peer copy (the last pair pushed) keeps the figures measured before it.
  const bool pairHung = timedOut && !p.pairs.empty();
  if (!s && !pairHung) return s;
  if (pairHung)
    LANES_WARN(Topo, -1, "probe: GPU%d to GPU%d: %s; the remaining pairs are not probed",
               p.pairs.back().a, p.pairs.back().b, s.message().c_str());
  p.host = std::move(t->probes.host);  // measured before, by the caller
  p.measuredBy = t->probes.measuredBy;
  p.copyBytes = o.bytes;
  t->probes = std::move(p);
  return Status::ok();
}

}  // namespace lanes::topo
