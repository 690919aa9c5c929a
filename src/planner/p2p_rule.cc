#include "planner/p2p_rule.h"

#include <algorithm>

#include "topology/path_class.h"

namespace lanes {
namespace {

int gpuIndex(const topo::Topology& t, const std::string& busId) {
  for (size_t i = 0; i < t.gpus.size(); ++i)
    if (!busId.empty() && t.gpus[i].busId == busId) return static_cast<int>(i);
  return -1;
}

// What the probe found between GPUs a and b, both directions together: a
// broken direction (its error), else the slower direction's rate.
struct PairVerdict {
  bool tested = false, broken = false;
  double gbps = 0;
  std::string error;
};
PairVerdict pairProbe(const topo::Topology& t, int a, int b) {
  PairVerdict v;
  for (const topo::PairProbe& p : t.probes.pairs) {
    if (!p.tested || !((p.a == a && p.b == b) || (p.a == b && p.b == a))) continue;
    if (!p.correct && !v.broken) {
      v.broken = true;
      v.error = p.error;
    }
    v.gbps = v.tested ? std::min(v.gbps, p.gbps) : p.gbps;
    v.tested = true;
  }
  return v;
}

// Staging through host memory from GPU a to GPU b: down on a's link, up on b's.
double stagingGBs(const topo::Topology& t, int a, int b) {
  double down = 0, up = 0;
  for (const topo::GpuProbe& g : t.probes.gpus) {
    if (g.gpu == a) down = g.d2h;
    if (g.gpu == b) up = g.h2d;
  }
  return std::min(down, up);
}

std::string gpuName(const topo::Topology& t, int g) {
  return "GPU " + std::to_string(g) + " (" + t.gpus[static_cast<size_t>(g)].busId + ")";
}

}  // namespace

std::string p2pRefusalByTopology(const topo::Topology& t, const std::vector<std::string>& busIds) {
  std::vector<int> gpus;
  for (const std::string& id : busIds) {
    const int g = gpuIndex(t, id);
    if (g >= 0 && std::find(gpus.begin(), gpus.end(), g) == gpus.end()) gpus.push_back(g);
  }
  std::sort(gpus.begin(), gpus.end());
  for (size_t i = 0; i < gpus.size(); ++i) {
    for (size_t j = i + 1; j < gpus.size(); ++j) {
      const int a = gpus[i], b = gpus[j];
      const PairVerdict probe = pairProbe(t, a, b);
      if (probe.broken)
        return "the probe found P2P between " + gpuName(t, a) + " and " + gpuName(t, b) +
               " broken (" + probe.error + ")";
      if (topo::gpuPath(t, a, b) != topo::PathClass::Sys) continue;
      const double staging = std::min(stagingGBs(t, a, b), stagingGBs(t, b, a));
      if (probe.tested && staging > 0 && probe.gbps > staging) continue;
      return gpuName(t, a) + " and " + gpuName(t, b) +
             " cross the CPU link (SYS), where P2P is usually slower than staging through host "
             "memory" +
             (probe.tested && staging > 0
                  ? ", and the probe measured it so (" + std::to_string(int(probe.gbps)) +
                        " against " + std::to_string(int(staging)) + " GB/s)"
                  : " (lanes-topo --probe measures both)") +
             "; LANES_P2P_DISABLE=0 forces P2P";
    }
  }
  return "";
}

}  // namespace lanes
