// Each check looks at the model only; probe results feed the P2P check.
#include "topology/warnings.h"

#include <cstdio>
#include <set>

#include "topology/path_class.h"

namespace lanes::topo {

const char* warningName(WarningKind kind) {
  switch (kind) {
    case WarningKind::LinkBelowMax:
      return "link-below-max";
    case WarningKind::ChipsetLanes:
      return "chipset-lanes";
    case WarningKind::AcsRedirect:
      return "acs-redirect";
    case WarningKind::IommuTranslating:
      return "iommu-translating";
    case WarningKind::SmallBar1:
      return "small-bar1";
    case WarningKind::P2pBroken:
      return "p2p-broken";
    case WarningKind::NicNumaMismatch:
      return "nic-numa";
  }
  return "?";
}

namespace {

std::string gpuName(const Topology& t, int g) {
  return "GPU" + std::to_string(g) + " (" + t.gpus[g].busId + ")";
}

std::string fmt(const char* f, double a, double b) {
  char buf[64];
  snprintf(buf, sizeof(buf), f, a, b);
  return buf;
}

void linkWarning(const std::string& subject, const PciLink& l, std::vector<Warning>* out) {
  Warning w{WarningKind::LinkBelowMax, subject, "", ""};
  double full = pcieGbps(l.maxGen ? l.maxGen : l.curGen, l.maxWidth ? l.maxWidth : l.curWidth);
  w.text = "link runs at PCIe Gen" + std::to_string(l.curGen) + " x" + std::to_string(l.curWidth) +
           " of Gen" + std::to_string(l.maxGen) + " x" + std::to_string(l.maxWidth) +
           fmt(" (%.1f of %.1f GB/s per direction)", l.gbps, full);
  if (l.maxWidth > 0 && l.curWidth < l.maxWidth)
    w.fix = "move the card to a slot wired x" + std::to_string(l.maxWidth) +
            " (the board manual says which slots share lanes), reseat it, drop risers, and check "
            "the BIOS bifurcation setting";
  else
    w.fix =
        "GPUs lower the link speed when idle: if `lanes-topo --probe` also shows low "
        "bandwidth, force Gen" +
        std::to_string(l.maxGen) +
        " for the slot in the BIOS and check risers/cables for signal loss";
  out->push_back(w);
}

}  // namespace

std::vector<Warning> findWarnings(const Topology& t) {
  std::vector<Warning> out;
  std::set<int> bridgesSeen;
  for (size_t g = 0; g < t.gpus.size(); ++g) {
    const int gi = static_cast<int>(g);
    const PciLink& l = t.nodes[t.gpus[g].node].link;
    if (l.degraded()) linkWarning(gpuName(t, gi), l, &out);
    for (int n : t.ancestors(t.gpus[g].node)) {
      const Node& node = t.nodes[n];
      if (node.kind != NodeKind::Bridge || !node.link.degraded() || !bridgesSeen.insert(n).second)
        continue;
      linkWarning("bridge " + node.busId + " above " + gpuName(t, gi), node.link, &out);
    }
    for (int n : t.ancestors(t.gpus[g].node)) {
      if (!t.nodes[n].chipset) continue;
      out.push_back({WarningKind::ChipsetLanes, gpuName(t, gi),
                     "sits behind chipset bridge " + t.nodes[n].busId +
                         ": its traffic shares the chipset's x4 uplink with USB, SATA and NVMe",
                     "move the GPU to a slot wired to the CPU (see the board manual's block "
                     "diagram)"});
      break;
    }
    if (t.gpus[g].bar1Bytes > 0 && t.gpus[g].bar1Bytes < (uint64_t{1} << 30))
      out.push_back({WarningKind::SmallBar1, gpuName(t, gi),
                     "BAR1 is " + std::to_string(t.gpus[g].bar1Bytes >> 20) +
                         " MiB: Resizable BAR is off, so peers and NICs see only a window of "
                         "GPU memory",
                     "enable 'Above 4G Decoding' and 'Resizable BAR' in the BIOS (CSM off) "
                     "and use a driver that supports it"});
  }
  std::set<int> acsSeen;
  for (size_t a = 0; a < t.gpus.size(); ++a) {
    for (size_t b = a + 1; b < t.gpus.size(); ++b) {
      for (int n : bridgesBetween(t, t.gpus[a].node, t.gpus[b].node)) {
        if (!t.nodes[n].acsRedirect || !acsSeen.insert(n).second) continue;
        out.push_back({WarningKind::AcsRedirect, "bridge " + t.nodes[n].busId,
                       "ACS redirect is on between GPU" + std::to_string(a) + " and GPU" +
                           std::to_string(b) +
                           ": P2P requests detour through the root complex (slow, or broken "
                           "with the IOMMU on)",
                       "disable ACS on it: `sudo setpci -s " + t.nodes[n].busId +
                           " ECAP_ACS+6.w=0000` (until reboot), or PCIe ACS control off in "
                           "the BIOS, unless VMs need the isolation"});
      }
    }
  }
  if (t.iommu == IommuMode::Translating && !t.gpus.empty())
    out.push_back({WarningKind::IommuTranslating, "IOMMU",
                   "the IOMMU translates device DMA: GPU P2P may fail or slow down, and every "
                   "DMA mapping costs",
                   "boot with `iommu=pt` (Intel: `intel_iommu=on iommu=pt`, AMD: `amd_iommu=on "
                   "iommu=pt`), or turn the IOMMU off in the BIOS where nothing needs it"});
  for (const PairProbe& p : t.probes.pairs) {
    if (!p.advertised || !p.tested || p.correct) continue;
    out.push_back(
        {WarningKind::P2pBroken, "GPU" + std::to_string(p.a) + " -> GPU" + std::to_string(p.b),
         "P2P is advertised but failed the probe" + (p.error.empty() ? "" : ": " + p.error),
         "Lanes stages this pair through host memory (for NCCL: NCCL_P2P_DISABLE=1); "
         "check the ACS and IOMMU warnings and the driver version"});
  }
  std::set<int> nicNumas;
  for (const Nic& n : t.nics)
    if (n.numa >= 0) nicNumas.insert(n.numa);
  for (size_t g = 0; !nicNumas.empty() && g < t.gpus.size(); ++g) {
    int numa = t.gpus[g].numa;
    if (numa < 0 || nicNumas.count(numa)) continue;
    out.push_back({WarningKind::NicNumaMismatch, gpuName(t, static_cast<int>(g)),
                   "no NIC on its NUMA node " + std::to_string(numa) +
                       ": traffic to other hosts crosses the inter-socket link",
                   "add a NIC on NUMA node " + std::to_string(numa) +
                       ", or give this GPU's rank less inter-host traffic"});
  }
  return out;
}

}  // namespace lanes::topo
