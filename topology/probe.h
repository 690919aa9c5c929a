// On-request measurements of the PCIe paths (topology/cuda/probe.cc):
// H2D, D2H and both-ways bandwidth per GPU, H2D and D2H by copy size, all GPUs
// to host at once, and per GPU pair whether P2P carries a pattern intact and
// how fast. Results go into Topology::probes and a cache file keyed by the
// topology's hash.
#pragma once

#include <cstddef>
#include <string>

#include "base/status.h"
#include "topology/model.h"

namespace lanes::topo {

struct ProbeOptions {
  size_t bytes = size_t{256} << 20;  // per transfer
  int repetitions = 5;               // best of
  bool pairs = true;                 // P2P correctness and bandwidth
  int onlyCudaDevice = -1;           // >= 0: that GPU alone (no context made on the others)
};

// The longest a probe waits for one step of GPU work (a timed copy, a
// ping-pong batch) before it gives up with a timeout: each takes milliseconds
// on a working GPU, and a first use must not hang on a broken one.
inline constexpr double kProbeStepSeconds = 30;

// Needs the CUDA data path; without it, or without GPUs, returns an error.
Status runProbes(const ProbeOptions& options, Topology* topo);

// Hash of what decides the probe results: GPU bus ids, names, link training,
// driver version, host name. Hex string.
std::string topologyHash(const Topology& topo);
// LANES_TOPO_CACHE, default $XDG_CACHE_HOME or ~/.cache /lanes/topo_probes.json;
// "" when caching is off (LANES_TOPO_CACHE=0 / none).
std::string probeCachePath();
// Attaches cached probes whose key matches; false when none do.
bool loadCachedProbes(const std::string& path, Topology* topo);
Status saveCachedProbes(const std::string& path, const Topology& topo);

}  // namespace lanes::topo
