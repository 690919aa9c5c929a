#include "planner/machine_facts.h"

#include <algorithm>

namespace lanes {

namespace {

// The GPU the figures describe: the one with CUDA index `cudaDev`, else the first.
const topo::Gpu* gpuOf(const topo::Topology& t, int cudaDev) {
  for (const topo::Gpu& g : t.gpus)
    if (g.cudaIndex == cudaDev && cudaDev >= 0) return &g;
  return t.gpus.empty() ? nullptr : &t.gpus.front();
}

// Unprobed: the assumed Gen4 x16 rates scaled by the link the GPU trained
// at, where the model knows it (an x8 or Gen3 link moves half as much).
void scaleToLink(const topo::Topology& t, int cudaDev, MachineFacts::Gpu* gpu) {
  const topo::Gpu* g = gpuOf(t, cudaDev);
  if (g == nullptr || g->node < 0 || g->node >= static_cast<int>(t.nodes.size())) return;
  const topo::PciLink& link = t.nodes[static_cast<size_t>(g->node)].link;
  const double gbps = link.known() ? topo::pcieGbps(link.curGen, link.curWidth) : link.gbps;
  if (gbps <= 0) return;
  const double factor = std::clamp(gbps / topo::pcieGbps(4, 16), 1.0 / 32, 4.0);
  for (int i = 0; i < MachineFacts::kCurvePoints; ++i) {
    gpu->h2dGBs[i] *= factor;
    gpu->d2hGBs[i] *= factor;
  }
  gpu->p2pGBs *= factor;
}

void takeGpuProbe(const topo::Topology& t, int cudaDev, MachineFacts::Gpu* gpu) {
  const topo::GpuProbe* probe = nullptr;
  for (const topo::GpuProbe& g : t.probes.gpus) {
    if (!g.curvesMeasured() || !g.latenciesMeasured()) continue;
    const bool mine = g.gpu >= 0 && g.gpu < static_cast<int>(t.gpus.size()) &&
                      t.gpus[static_cast<size_t>(g.gpu)].cudaIndex == cudaDev;
    if (probe == nullptr || mine) probe = &g;
    if (mine) break;
  }
  if (probe == nullptr) return scaleToLink(t, cudaDev, gpu);
  for (int i = 0; i < MachineFacts::kCurvePoints; ++i) {
    gpu->h2dGBs[i] = probe->h2dCurve[static_cast<size_t>(i)];
    gpu->d2hGBs[i] = probe->d2hCurve[static_cast<size_t>(i)];
  }
  if (probe->d2dCurve.size() == probe->h2dCurve.size())
    std::copy(probe->d2dCurve.begin(), probe->d2dCurve.end(), gpu->d2dGBs);
  // P2P copies go at the slowest pair's rate: a ring waits for its slowest link.
  double slowest = 0;
  for (const topo::PairProbe& q : t.probes.pairs)
    if (q.tested && q.correct && q.gbps > 0)
      slowest = slowest > 0 ? std::min(slowest, q.gbps) : q.gbps;
  // Unprobed pairs: the link's rate, as much as a copy to host memory gets.
  const int last = MachineFacts::kCurvePoints - 1;
  gpu->p2pGBs = slowest > 0 ? slowest : std::min(gpu->h2dGBs[last], gpu->d2hGBs[last]);
  if (probe->h2d > 0 && probe->d2h > 0 && probe->bidir > 0)
    gpu->bothWaysShare = std::clamp(probe->bidir / (probe->h2d + probe->d2h), 0.3, 1.0);
  gpu->flagUs = probe->flagUs;
  gpu->launchUs = probe->launchUs;
  gpu->measured = true;
}

}  // namespace

MachineFacts machineFactsOf(const topo::Topology& t, int cudaDev) {
  MachineFacts m;
  if (t.cores > 0) m.cores = t.cores;
  takeGpuProbe(t, cudaDev, &m.gpu);
  const topo::HostProbe& h = t.probes.host;
  if (!h.measured()) return m;
  static_assert(MachineFacts::kCurvePoints == topo::HostProbe::kCurvePoints);
  m.callUs = h.callUs;
  m.hopLatencyUs = h.hopLatencyUs;
  m.stepUs = h.stepUs > 0 ? h.stepUs : h.hopLatencyUs;
  m.rootedUs = h.rootedUs;
  m.sumUs = h.sumUs;
  for (int i = 0; i < MachineFacts::kCurvePoints; ++i) {
    m.hopGBs[i] = h.hopGBs[static_cast<size_t>(i)];
    m.reduceGBs[i] = h.reduceGBs[static_cast<size_t>(i)];
  }
  m.memGBs = h.memGBs;
  m.exchangeGBs = h.exchangeGBs;
  m.crossPackageLatencyUs = h.crossPackageLatencyUs;
  m.crossPackageGBs = h.crossPackageGBs;
  for (int w = 0; w < 2; ++w) {
    if (h.wireEncodeNs[w] > 0) m.wireEncodeNs[w] = h.wireEncodeNs[w];
    if (h.wireDecodeNs[w] > 0) m.wireDecodeNs[w] = h.wireDecodeNs[w];
  }
  if (h.tcpGBs > 0) {
    // Loopback measures the TCP stack; between hosts the NIC's port speed
    // bounds the rate too (the fastest one the model knows).
    double nicGBs = 0;
    for (const topo::Nic& nic : t.nics) nicGBs = std::max(nicGBs, nic.gbps);
    m.socketLatencyUs = h.tcpLatencyUs;
    m.socketGBs = nicGBs > 0 ? std::min(h.tcpGBs, nicGBs) : h.tcpGBs;
  }
  m.measured = true;
  return m;
}

}  // namespace lanes
