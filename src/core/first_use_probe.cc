#include "core/first_use_probe.h"

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
  const topo::Topology& current = processTopology();
  if (!current.probes.empty()) return;  // from the cache or LANES_TOPO_FILE
  if (!envBool("LANES_TOPO_PROBE", true) || envString("LANES_TOPO_FILE")) return;
  topo::FirstUseProbe p;
  p.cachePath = topo::probeCachePath();
  if (p.cachePath.empty() || timeoutSeconds < kShortestTimeout) {
    LANES_INFO(Plan, -1,
               "first use of this machine: not measured (%s); the cost model assumes its figures",
               p.cachePath.empty() ? "LANES_TOPO_CACHE is off" : "LANES_TIMEOUT is under 60 s");
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
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!s)
    LANES_WARN(Plan, -1, "measuring this machine at first use: %s; %s", s.message().c_str(),
               t.probes.empty() ? "the cost model assumes its figures (lanes-topo --probe measures)"
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
