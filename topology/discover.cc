// Merges the sources in order: tree (hwloc, else sysfs), then sysfs
// training/ACS/IOMMU, NVML and CUDA on top.
#include <unistd.h>

#include <algorithm>

#include "base/log.h"
#include "topology/discovery.h"
#include "topology/sysfs_pci.h"

namespace lanes::topo {

void noteMissing(Topology* t, const std::string& sentence) {
  LANES_INFO(Topo, -1, "topology: %s", sentence.c_str());
  t->missing.push_back(sentence);
}

namespace {

// nvidia-smi numbers GPUs and NICs in PCI order; so does the model.
// The GPU matrices filled so far (hwloc's NVLink bandwidth) follow the GPUs.
void sortDevices(Topology* t) {
  std::vector<size_t> order(t->gpus.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return t->gpus[a].busId < t->gpus[b].busId; });
  std::vector<Gpu> gpus;
  std::vector<std::vector<double>> gbps(order.size(), std::vector<double>(order.size(), 0));
  t->resizeMatrices();
  for (size_t a = 0; a < order.size(); ++a) {
    gpus.push_back(t->gpus[order[a]]);
    for (size_t b = 0; b < order.size(); ++b) gbps[a][b] = t->nvlinkGbps[order[a]][order[b]];
  }
  t->gpus = std::move(gpus);
  t->nvlinkGbps = std::move(gbps);
  std::sort(t->nics.begin(), t->nics.end(),
            [](const Nic& a, const Nic& b) { return a.busId < b.busId; });
}

}  // namespace

void finishTopology(Topology* t) {
  if (t->nodes.empty()) t->addNode(NodeKind::Machine, -1);
  for (Gpu& g : t->gpus) {
    if (g.busId.empty()) g.busId = t->nodes[g.node].busId;
    int numa = t->numaOf(g.node);
    if (numa >= 0) g.numa = numa;
    if (g.cpus.empty()) {
      for (int n : t->ancestors(g.node))
        if (t->nodes[n].kind == NodeKind::Numa) g.cpus = t->nodes[n].name;
    }
  }
  for (Nic& n : t->nics) {
    int numa = t->numaOf(n.node);
    if (numa >= 0) n.numa = numa;
  }
  for (Node& n : t->nodes) {
    if (n.kind == NodeKind::Bridge && !n.chipset)
      n.chipset = isChipsetBridge(n.vendor, n.device, n.busId);
    if (n.link.known() && n.link.gbps == 0) n.link.gbps = pcieGbps(n.link.curGen, n.link.curWidth);
  }
  t->resizeMatrices();
}

Status discover(const DiscoverOptions& o, Topology* out) {
  Topology t;
  if (o.hwloc) {
    Status s = discoverHwloc(&t);
    if (!s) noteMissing(&t, "hwloc: " + s.message());
  } else {
    noteMissing(&t, "hwloc: not used (disabled), the tree comes from sysfs");
  }
  std::vector<std::string> missing = t.missing;
  if (t.nodes.empty() && o.sysfs) {
    LANES_RETURN_IF_ERROR(discoverSysfsTree(o.sysfsRoot, &t));
    t.missing = missing;
  }
  if (t.nodes.empty()) t.addNode(NodeKind::Machine, -1);
  sortDevices(&t);
  t.resizeMatrices();
  if (o.sysfs)
    enrichFromSysfs(o.sysfsRoot, &t);
  else
    noteMissing(&t, "sysfs: not used (disabled)");
  if (o.nvml)
    enrichFromNvml(&t);
  else
    noteMissing(&t, "NVML: not used (disabled)");
  if (o.cuda)
    enrichFromCuda(&t);
  else
    noteMissing(&t, "CUDA: not used (disabled)");
  if (t.hostname.empty()) {
    char host[256] = {};
    if (gethostname(host, sizeof(host) - 1) == 0) t.hostname = host;
  }
  finishTopology(&t);
  *out = std::move(t);
  return Status::ok();
}

}  // namespace lanes::topo
