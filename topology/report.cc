// lanes-topo's text. Keep the matrix byte-compatible with nvidia-smi's
// layout: people paste both into the same issue threads.
#include "topology/report.h"

#include <cstdio>

#include "topology/path_class.h"
#include "topology/warnings.h"

namespace lanes::topo {

namespace {

std::string printf1(const char* f, double v) {
  char buf[64];
  snprintf(buf, sizeof(buf), f, v);
  return buf;
}

std::string linkText(const PciLink& l) {
  if (!l.known())
    return l.gbps > 0 ? printf1("%.1f GB/s (generation/width unknown)", l.gbps) : "unknown";
  std::string s = "Gen" + std::to_string(l.curGen) + " x" + std::to_string(l.curWidth);
  if (l.maxGen > 0 || l.maxWidth > 0)
    s += " (max Gen" + std::to_string(l.maxGen) + " x" + std::to_string(l.maxWidth) + ")";
  return s + printf1(", %.1f GB/s per direction", l.gbps);
}

}  // namespace

std::string formatMatrix(const Topology& t) {
  std::string out;
  size_t ng = t.gpus.size(), nn = t.nics.size();
  for (size_t g = 0; g < ng; ++g) out += "\tGPU" + std::to_string(g);
  for (size_t n = 0; n < nn; ++n) out += "\tNIC" + std::to_string(n);
  out += "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n";
  auto cell = [](PathClass c, int nv) {
    return c == PathClass::Self ? std::string(" X ") : pathName(c, nv);
  };
  for (size_t a = 0; a < ng; ++a) {
    out += "GPU" + std::to_string(a);
    for (size_t b = 0; b < ng; ++b) {
      int ia = static_cast<int>(a), ib = static_cast<int>(b);
      out += "\t" + cell(gpuPath(t, ia, ib), a < t.nvlinks.size() ? t.nvlinks[a][b] : 0);
    }
    for (size_t n = 0; n < nn; ++n)
      out += "\t" + cell(gpuNicPath(t, static_cast<int>(a), static_cast<int>(n)), 0);
    const Gpu& g = t.gpus[a];
    out += "\t" + (g.cpus.empty() ? "N/A" : g.cpus) + "\t" +
           (g.numa >= 0 ? std::to_string(g.numa) : "N/A") + "\t\tN/A\n";
  }
  for (size_t n = 0; n < nn; ++n) {
    out += "NIC" + std::to_string(n);
    for (size_t g = 0; g < ng; ++g)
      out += "\t" + cell(gpuNicPath(t, static_cast<int>(g), static_cast<int>(n)), 0);
    for (size_t m = 0; m < nn; ++m)
      out += "\t" + cell(classifyNodes(t, t.nics[n].node, t.nics[m].node), 0);
    out += "\n";
  }
  out +=
      "\nLegend:\n\n"
      "  X    = Self\n"
      "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes "
      "(e.g., QPI/UPI)\n"
      "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges "
      "within a NUMA node\n"
      "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
      "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host "
      "Bridge)\n"
      "  PIX  = Connection traversing at most a single PCIe bridge\n"
      "  NV#  = Connection traversing a bonded set of # NVLinks\n";
  if (nn > 0) {
    out += "\nNIC Legend:\n\n";
    for (size_t n = 0; n < nn; ++n)
      out += "  NIC" + std::to_string(n) + ": " + t.nics[n].name + "\n";
  }
  return out;
}

std::string formatReport(const Topology& t) {
  std::string out = "Host " + (t.hostname.empty() ? std::string("(unknown)") : t.hostname) + ": " +
                    std::to_string(t.packageCount()) + " CPU package(s), " +
                    std::to_string(t.cores) + " cores, " + std::to_string(t.pus) +
                    " hardware threads, " + std::to_string(t.numaCount()) + " NUMA node(s)\n";
  for (const Node& n : t.nodes)
    if (n.kind == NodeKind::Numa)
      out += "  NUMA node " + std::to_string(n.osIndex) + ": CPUs " +
             (n.name.empty() ? "?" : n.name) + "\n";
  out += "  IOMMU: " + std::string(iommuName(t.iommu)) +
         (t.driverVersion.empty() ? "" : ", NVIDIA driver " + t.driverVersion) + "\n";
  if (t.gpus.empty()) {
    out += "\nno GPU visible\n";
  } else {
    out += "\n" + formatMatrix(t) + "\n";
    for (size_t g = 0; g < t.gpus.size(); ++g) {
      const Gpu& gpu = t.gpus[g];
      out += "GPU" + std::to_string(g) + ": " + (gpu.name.empty() ? "NVIDIA GPU" : gpu.name) +
             ", bus " + gpu.busId + ", CUDA " +
             (gpu.cudaIndex >= 0 ? std::to_string(gpu.cudaIndex) : "-") + "\n";
      out += "  link " + linkText(t.nodes[gpu.node].link) + "\n";
      out += "  NUMA node " + (gpu.numa >= 0 ? std::to_string(gpu.numa) : "unknown") +
             ", CPU affinity " + (gpu.cpus.empty() ? "unknown" : gpu.cpus) + "\n";
      if (gpu.bar1Bytes > 0) out += "  BAR1 " + std::to_string(gpu.bar1Bytes >> 20) + " MiB\n";
      std::string nvlink;
      for (size_t p = 0; g < t.nvlinkGbps.size() && p < t.nvlinkGbps[g].size(); ++p)
        if (t.nvlinkGbps[g][p] > 0)
          nvlink += printf1(nvlink.empty() ? " GPU%.0f" : ", GPU%.0f", static_cast<double>(p)) +
                    printf1(" %.1f GB/s", t.nvlinkGbps[g][p]);
      if (!nvlink.empty()) out += "  NVLink to" + nvlink + "\n";
    }
  }
  const Probes& p = t.probes;
  if (!p.empty()) {
    const bool firstUse = p.measuredBy == Probes::kAtFirstUse;
    const size_t copyMiB = (p.copyBytes > 0 ? p.copyBytes : size_t{256} << 20) >> 20;
    out += "\nProbes (" +
           std::string(firstUse ? "measured at first use: the first communicator's GPU, no P2P "
                                  "pairs; lanes-topo --probe measures all"
                                : "lanes-topo --probe") +
           "; GPU copies from pinned host memory, best of several " + std::to_string(copyMiB) +
           " MiB copies):\n";
    for (const GpuProbe& g : p.gpus) {
      out += "  GPU" + std::to_string(g.gpu) + printf1(": H2D %6.1f GB/s", g.h2d) +
             printf1("  D2H %6.1f GB/s", g.d2h) + printf1("  both-ways %6.1f GB/s", g.bidir) +
             printf1(" (%.1f each way)\n", g.bidir / 2);
      if (g.curvesMeasured()) {
        out += "    copies 4 KiB..64 MiB H2D:";
        for (double v : g.h2dCurve) out += printf1(" %.3g", v);
        out += " GB/s\n    copies 4 KiB..64 MiB D2H:";
        for (double v : g.d2hCurve) out += printf1(" %.3g", v);
        out += " GB/s\n";
        if (g.d2dCurve.size() == g.h2dCurve.size()) {
          out += "    copies 4 KiB..64 MiB within the GPU:";
          for (double v : g.d2dCurve) out += printf1(" %.3g", v);
          out += " GB/s\n";
        }
      }
      if (g.latenciesMeasured())
        out += printf1("    stream flag %.2f us one way", g.flagUs) +
               printf1(", kernel launch %.2f us\n", g.launchUs);
    }
    if (p.gpus.size() > 0 && p.allH2d > 0)
      out += printf1("  all GPUs at once: H2D %.1f GB/s", p.allH2d) +
             printf1(", D2H %.1f GB/s aggregate\n", p.allD2h);
    for (const PairProbe& q : p.pairs) {
      out += "  P2P GPU" + std::to_string(q.a) + " -> GPU" + std::to_string(q.b) + ": ";
      if (!q.advertised)
        out += "not advertised\n";
      else if (!q.correct)
        out += "FAILED (" + q.error + ")\n";
      else
        out += printf1("correct, %.1f GB/s\n", q.gbps);
    }
    const HostProbe& h = p.host;
    if (h.measured()) {
      out += printf1("  host path: hop %.2f us", h.hopLatencyUs) +
             (h.stepUs > 0 ? printf1(", later step %.2f us", h.stepUs) : std::string()) +
             printf1(", call %.2f us", h.callUs) +
             (h.rootedUs > 0 ? printf1(", rooted call %.2f us", h.rootedUs) : std::string()) +
             (h.sumUs > 0 ? printf1(", host summation call %.2f us", h.sumUs) : std::string()) +
             printf1(", 1 MiB hop %.1f GB/s", h.hopGBs[4]) +
             printf1(", reduce %.1f GB/s", h.reduceGBs[4]) +
             printf1("; memory %.1f GB/s", h.memGBs) +
             printf1(", two hops at once %.1f GB/s each\n", h.exchangeGBs);
      if (h.tcpGBs > 0)
        out += "  TCP over loopback (the stack's share of a hop between hosts):" +
               printf1(" %.1f us", h.tcpLatencyUs) + printf1(", %.2f GB/s\n", h.tcpGBs);
      if (h.crossPackageGBs > 0)
        out += "  across CPU packages (a rank pinned to each):" +
               printf1(" %.2f us", h.crossPackageLatencyUs) +
               printf1(", %.1f GB/s\n", h.crossPackageGBs);
      if (h.wireEncodeNs[0] > 0)
        out += "  wire codec on one core (LANES_WIRE): bf16" +
               printf1(" encode %.2f", h.wireEncodeNs[0]) +
               printf1(", decode and add %.2f ns a value; fp8", h.wireDecodeNs[0]) +
               printf1(" encode %.2f", h.wireEncodeNs[1]) +
               printf1(", decode and add %.2f ns a value\n", h.wireDecodeNs[1]);
    }
  }
  if (!t.missing.empty()) {
    out += "\nNot available:\n";
    for (const std::string& m : t.missing) out += "  - " + m + "\n";
  }
  std::vector<Warning> warnings = findWarnings(t);
  out +=
      "\nWarnings: " + (warnings.empty() ? std::string("none") : std::to_string(warnings.size())) +
      "\n";
  for (const Warning& w : warnings)
    out += "  [" + std::string(warningName(w.kind)) + "] " + w.subject + ": " + w.text +
           "\n      fix: " + w.fix + "\n";
  return out;
}

}  // namespace lanes::topo
