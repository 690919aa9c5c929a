#include "core/first_use_probe.h"

#if LANES_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <chrono>
#include <mutex>
#include <utility>

#include "base/env.h"
#include "base/log.h"
#include "core/comm_topology.h"
#include "core/gpu_latency_probe.h"
#include "core/host_probe.h"
#include "topology/probe.h"
#include "topology/probe_first_use.h"

namespace lanes {
namespace {

// A measurement that keeps a first init to seconds: `lanes-topo --probe`'s,
// with 64 MiB copies (the curves' largest), best of 3, on this GPU alone (no
// context on the others, no P2P pairs: those stay as the topology rules them).
Status measureMachine(int cudaDev, topo::Topology* t) {
  t->probes.measuredBy = topo::Probes::kAtFirstUse;
  LANES_RETURN_IF_ERROR(measureHostProbe(*t, &t->probes.host));
  topo::ProbeOptions gpu;
  gpu.bytes = size_t{64} << 20;
  gpu.repetitions = 3;
  gpu.pairs = false;
  gpu.onlyCudaDevice = cudaDev;
  LANES_RETURN_IF_ERROR(topo::runProbes(gpu, t));
  return measureGpuLatencies(t);
}

constexpr double kShortestTimeout = 60;  // seconds a peer may wait at least

void probeOnce(int cudaDev, double timeoutSeconds) {
  const topo::Topology current = processTopologySnapshot();
  if (!current.probes.empty()) return;  // from the cache or LANES_TOPO_FILE
  if (!envBool("LANES_TOPO_PROBE", true) || envString("LANES_TOPO_FILE")) return;
  topo::FirstUseProbe p;
  p.cachePath = topo::probeCachePath();
  // Discovery that missed the GPU (no sysfs or NVML in a container): its
  // probe would fail after the host's, in every process, as nothing is cached.
  const bool gpuKnown = std::any_of(current.gpus.begin(), current.gpus.end(),
                                    [&](const topo::Gpu& g) { return g.cudaIndex == cudaDev; });
  const char* skipped = p.cachePath.empty() ? "LANES_TOPO_CACHE is off"
                        : timeoutSeconds < kShortestTimeout
                            ? "the communicator's timeout (LANES_TIMEOUT or "
                              "lanesConfig_t.timeoutSeconds) is under 60 s"
                        : !gpuKnown ? "the topology does not list this rank's GPU"
                                    : nullptr;
  if (skipped != nullptr) {
    LANES_INFO(Plan, -1,
               "first use of this machine: not measured (%s); the cost model assumes its figures",
               skipped);
    return;
  }
  p.lockSeconds = std::min(120.0, timeoutSeconds / 2);
  p.measure = [cudaDev](topo::Topology* t) { return measureMachine(cudaDev, t); };
  LANES_INFO(Plan, -1,
             "first use of this machine: measuring the host path and GPU %d for the cost model "
             "(seconds, once; cached in %s; LANES_TOPO_PROBE=0 skips it)",
             cudaDev, p.cachePath.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  topo::Topology t = current;
  topo::FirstUseResult result = topo::FirstUseResult::NoCache;
  const Status s = topo::probeAtFirstUse(p, &t, &result);
#if LANES_HAVE_CUDA
  // A failed CUDA call of the probe (out of memory on a full GPU) must not
  // surface in the caller's next cudaGetLastError.
  if (!s) cudaGetLastError();
#endif
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!s)
    LANES_WARN(Plan, -1, "measuring this machine at first use: %s; %s", s.message().c_str(),
               t.probes.empty()
                   ? "the cost model assumes its figures and the next process measures again "
                     "(lanes-topo --probe measures and caches; LANES_TOPO_PROBE=0 stops trying)"
                   : "planning with the figures measured, uncached");
  else
    LANES_INFO(Plan, -1, "first use of this machine: %s in %.1f s",
               result == topo::FirstUseResult::Cached ? "another process measured it; read"
                                                      : "measured and cached",
               seconds);
  if (!t.probes.empty()) attachProcessProbes(std::move(t.probes));
}

}  // namespace

void probeMachineAtFirstUse(int cudaDev, double timeoutSeconds) {
  static std::once_flag once;
  std::call_once(once, [&] { probeOnce(cudaDev, timeoutSeconds); });
}

}  // namespace lanes
