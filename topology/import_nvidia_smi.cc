// Tree synthesis from the matrix (nvidia_smi_matrix.cc reads it). NUMA nodes
// come from the NUMA Affinity column (else CPU Affinity), because SYS only
// says "another root complex": on many one- and two-socket boxes every GPU
// pair is SYS. Devices without affinity (NICs, old drivers) join the node of
// what they reach without SYS. The matrix does not say which NUMA nodes share
// a socket, so each NUMA node gets a package. Within a node, PHB-or-closer
// share a host bridge, PXB-or-closer a root port, PIX a switch; NV# pairs say
// nothing about PCIe.
#include "topology/import_nvidia_smi.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <set>

#include "topology/json_io.h"
#include "topology/nvidia_smi_matrix.h"
#include "topology/path_class.h"

namespace lanes::topo {

namespace {

// Groups of devices joined by `close` (union-find), in first-member order.
std::vector<std::vector<int>> groups(const std::vector<int>& members,
                                     const std::function<bool(int, int)>& close) {
  std::map<int, int> parent;
  for (int m : members) parent[m] = m;
  std::function<int(int)> find = [&](int x) {
    return parent[x] == x ? x : parent[x] = find(parent[x]);
  };
  for (int a : members)
    for (int b : members)
      if (a < b && close(a, b)) parent[find(a)] = find(b);
  std::vector<std::vector<int>> out;
  std::map<int, size_t> slot;
  for (int m : members) {
    int r = find(m);
    if (!slot.count(r)) {
      slot[r] = out.size();
      out.emplace_back();
    }
    out[slot[r]].push_back(m);
  }
  return out;
}

bool pcie(PathClass c) { return c >= PathClass::Pix && c <= PathClass::Node; }

struct NumaGroup {
  std::vector<int> members;
  int os = -1;
  std::string cpus;
  bool hasGpu = false;
};

// Devices -> NUMA nodes: same declared affinity, or a non-SYS PCIe path
// between devices whose affinities do not disagree, or NVLink between
// devices that declare none. Notes what the tree cannot keep.
std::vector<NumaGroup> numaGroups(const SmiMatrix& m, std::vector<std::string>* notes) {
  const int n = static_cast<int>(m.devices.size());
  std::vector<std::string> key(n);
  for (int d = 0; d < n; ++d)
    key[d] = m.numa[d] >= 0 ? "numa " + std::to_string(m.numa[d])
                            : (m.cpus[d].empty() ? "" : "cpus " + m.cpus[d]);
  std::vector<int> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  std::vector<std::string> rootKey = key;
  std::function<int(int)> find = [&](int x) {
    return parent[x] == x ? x : parent[x] = find(parent[x]);
  };
  auto unite = [&](int a, int b) {
    int ra = find(a), rb = find(b);
    if (ra == rb) return true;
    if (!rootKey[ra].empty() && !rootKey[rb].empty() && rootKey[ra] != rootKey[rb]) return false;
    parent[rb] = ra;
    if (rootKey[ra].empty()) rootKey[ra] = rootKey[rb];
    return true;
  };
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b)
      if (!key[a].empty() && key[a] == key[b]) unite(a, b);
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b)
      if (pcie(m.cls[a][b]) && !unite(a, b))
        notes->push_back("nvidia-smi import: " + m.devices[a] + " and " + m.devices[b] + " are " +
                         pathName(m.cls[a][b]) + " apart but their affinities differ (" +
                         rootKey[find(a)] + ", " + rootKey[find(b)] +
                         "); the model follows the affinity columns");
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b)
      if (m.cls[a][b] == PathClass::NvLink && rootKey[find(a)].empty() && rootKey[find(b)].empty())
        unite(a, b);
  std::vector<NumaGroup> out;
  std::map<int, size_t> slot;
  for (int d = 0; d < n; ++d) {
    int r = find(d);
    if (!slot.count(r)) {
      slot[r] = out.size();
      out.emplace_back();
    }
    NumaGroup& g = out[slot[r]];
    g.members.push_back(d);
    if (m.isGpu[d] && m.numa[d] >= 0) g.os = m.numa[d];
    if (m.isGpu[d] && g.cpus.empty()) g.cpus = m.cpus[d];
    g.hasGpu = g.hasGpu || m.isGpu[d];
  }
  // Devices no GPU reaches without SYS: the matrix has no NUMA node for
  // them; the first GPU node takes them rather than inventing a node.
  std::vector<NumaGroup> kept;
  std::vector<int> homeless;
  for (NumaGroup& g : out) {
    if (g.hasGpu)
      kept.push_back(std::move(g));
    else
      homeless.insert(homeless.end(), g.members.begin(), g.members.end());
  }
  std::set<int> used;
  for (const NumaGroup& g : kept)
    if (g.os >= 0) used.insert(g.os);
  for (NumaGroup& g : kept)
    for (int next = 0; g.os < 0; ++next)
      if (!used.count(next)) used.insert(g.os = next);
  std::stable_sort(kept.begin(), kept.end(),
                   [](const NumaGroup& a, const NumaGroup& b) { return a.os < b.os; });
  for (int d : homeless) {
    kept[0].members.push_back(d);
    notes->push_back("nvidia-smi import: " + m.devices[d] +
                     " is SYS from every GPU, so its NUMA node is unknown; placed on NUMA node " +
                     std::to_string(kept[0].os));
  }
  int sysPairs = 0;
  std::string example;
  for (const NumaGroup& g : kept)
    for (int a : g.members)
      for (int b : g.members)
        if (a < b && m.cls[a][b] == PathClass::Sys && sysPairs++ == 0)
          example = m.devices[a] + "-" + m.devices[b];
  if (sysPairs > 0)
    notes->push_back("nvidia-smi import: " + std::to_string(sysPairs) +
                     " device pair(s) are SYS within one NUMA node (e.g. " + example +
                     "); the tree puts a NUMA node's devices together, so they show as NODE");
  return kept;
}

}  // namespace

Status parseNvidiaSmiTopo(const std::string& text, Topology* out) {
  SmiMatrix m;
  LANES_RETURN_IF_ERROR(readNvidiaSmiMatrix(text, &m));
  const int n = static_cast<int>(m.devices.size());
  auto within = [&](PathClass limit) {
    return [&, limit](int a, int b) { return pcie(m.cls[a][b]) && m.cls[a][b] <= limit; };
  };
  Topology t;
  t.addNode(NodeKind::Machine, -1);
  std::vector<int> nodeOf(n, -1);
  auto addBridge = [&](int parent) { return t.addNode(NodeKind::Bridge, parent); };
  std::vector<std::string> notes;
  int socket = 0;
  for (const NumaGroup& g : numaGroups(m, &notes)) {
    int pkg = t.addNode(NodeKind::Package, 0);
    t.nodes[pkg].osIndex = socket++;
    int nn = t.addNode(NodeKind::Numa, pkg);
    t.nodes[nn].osIndex = g.os;
    t.nodes[nn].name = g.cpus;
    for (const auto& hb : groups(g.members, within(PathClass::Phb))) {
      int host = t.addNode(NodeKind::HostBridge, nn);
      for (const auto& rp : groups(hb, within(PathClass::Pxb))) {
        int port = addBridge(host);
        auto pix = groups(rp, within(PathClass::Pix));
        if (pix.size() == 1 && pix[0].size() == 1) {
          nodeOf[pix[0][0]] = port;
          continue;
        }
        int top = port;
        if (pix.size() > 1) top = addBridge(port);  // an upper switch joining the PIX groups
        for (const auto& sw : pix) {
          int up = pix.size() > 1 ? addBridge(addBridge(top)) : addBridge(top);
          for (int d : sw) nodeOf[d] = addBridge(up);
        }
      }
    }
  }
  std::vector<int> gpuIdx;
  for (int d = 0; d < n; ++d) {
    int node = t.addNode(m.isGpu[d] ? NodeKind::Gpu : NodeKind::Nic, nodeOf[d]);
    if (m.isGpu[d]) {
      Gpu g;
      g.node = node;
      g.cpus = m.cpus[d];
      t.gpus.push_back(g);
      gpuIdx.push_back(d);
    } else {
      // NIC0 is named in the NIC Legend; older drivers name the column itself (mlx5_0).
      Nic nic;
      nic.node = node;
      auto legend = m.nicNames.find(m.devices[d]);
      nic.name = nic.rdma = legend != m.nicNames.end() ? legend->second : m.devices[d];
      t.nics.push_back(nic);
    }
  }
  t.resizeMatrices();
  for (size_t a = 0; a < gpuIdx.size(); ++a)
    for (size_t b = 0; b < gpuIdx.size(); ++b) t.nvlinks[a][b] = m.nvlinks[gpuIdx[a]][gpuIdx[b]];
  t.sources.push_back("nvidia-smi");
  t.missing.push_back(
      "nvidia-smi import: PCIe link training, bus ids, BAR1 and ACS are not in "
      "`nvidia-smi topo -m`; bridges and host bridges are synthesised, one CPU package per "
      "NUMA node");
  t.missing.insert(t.missing.end(), notes.begin(), notes.end());
  for (Gpu& g : t.gpus) {
    g.numa = t.numaOf(g.node);
    if (g.cpus.empty())
      for (int a : t.ancestors(g.node))
        if (t.nodes[a].kind == NodeKind::Numa) g.cpus = t.nodes[a].name;
  }
  for (Nic& nic : t.nics) nic.numa = t.numaOf(nic.node);
  *out = std::move(t);
  return Status::ok();
}

Status importNvidiaSmiFile(const std::string& path, Topology* out) {
  std::string text;
  LANES_RETURN_IF_ERROR(readTextFile(path, &text));
  Status s = parseNvidiaSmiTopo(text, out);
  if (!s) return Status(s.code(), path + ": " + s.message());
  return Status::ok();
}

}  // namespace lanes::topo
