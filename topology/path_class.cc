// Path classification over the tree. A physical PCIe switch shows up as an
// upstream-port bridge with one downstream-port bridge per slot; both count
// as one switch, as nvidia-smi and NCCL count them. Root ports (bridges right
// under a host bridge) are part of the host bridge's side and do not count.
#include "topology/path_class.h"

#include <algorithm>
#include <cstdlib>
#include <set>

namespace lanes::topo {

namespace {

bool isRootPort(const Topology& t, int n) {
  const Node& node = t.nodes[n];
  return node.kind == NodeKind::Bridge &&
         (node.parent < 0 || t.nodes[node.parent].kind != NodeKind::Bridge);
}

// The switch a non-root bridge belongs to. Below a root port, non-root bridges
// alternate: upstream port (even depth), downstream port (odd depth); a
// downstream port belongs to its parent's switch.
int switchOf(const Topology& t, int n) {
  int depth = 0;
  for (int p = t.nodes[n].parent;
       p >= 0 && t.nodes[p].kind == NodeKind::Bridge && !isRootPort(t, p); p = t.nodes[p].parent)
    ++depth;
  return depth % 2 == 0 ? n : t.nodes[n].parent;
}

int commonAncestor(const Topology& t, int a, int b, std::vector<int>* upA, std::vector<int>* upB) {
  *upA = t.ancestors(a);
  *upB = t.ancestors(b);
  for (int x : *upA)
    if (std::find(upB->begin(), upB->end(), x) != upB->end()) return x;
  return -1;
}

}  // namespace

std::string pathName(PathClass c, int nvlinks) {
  switch (c) {
    case PathClass::Self:
      return "X";
    case PathClass::NvLink:
      return "NV" + std::to_string(nvlinks);
    case PathClass::Pix:
      return "PIX";
    case PathClass::Pxb:
      return "PXB";
    case PathClass::Phb:
      return "PHB";
    case PathClass::Node:
      return "NODE";
    case PathClass::Sys:
      return "SYS";
    default:
      return "?";
  }
}

bool parsePathName(const std::string& text, PathClass* out, int* nvlinks) {
  *nvlinks = 0;
  static const std::pair<const char*, PathClass> kNames[] = {
      {"X", PathClass::Self},  {"PIX", PathClass::Pix},   {"PXB", PathClass::Pxb},
      {"PHB", PathClass::Phb}, {"NODE", PathClass::Node}, {"SYS", PathClass::Sys},
      {"SOC", PathClass::Sys},  // older drivers' name for SYS
  };
  for (const auto& [name, cls] : kNames) {
    if (text == name) {
      *out = cls;
      return true;
    }
  }
  if (text.size() > 2 && text.compare(0, 2, "NV") == 0) {
    char* end = nullptr;
    long n = std::strtol(text.c_str() + 2, &end, 10);
    if (end != nullptr && *end == '\0' && n > 0) {
      *out = PathClass::NvLink;
      *nvlinks = static_cast<int>(n);
      return true;
    }
  }
  return false;
}

std::vector<int> bridgesBetween(const Topology& t, int a, int b) {
  std::vector<int> upA, upB, out;
  int lca = commonAncestor(t, a, b, &upA, &upB);
  for (const auto* up : {&upA, &upB}) {
    for (int n : *up) {
      if (n == lca) break;
      if (t.nodes[n].kind == NodeKind::Bridge) out.push_back(n);
    }
  }
  if (lca >= 0 && t.nodes[lca].kind == NodeKind::Bridge) out.push_back(lca);
  return out;
}

PathClass classifyNodes(const Topology& t, int a, int b) {
  if (a < 0 || b < 0) return PathClass::Unknown;
  if (a == b) return PathClass::Self;
  std::vector<int> upA, upB;
  int lca = commonAncestor(t, a, b, &upA, &upB);
  if (lca < 0) return PathClass::Unknown;
  switch (t.nodes[lca].kind) {
    case NodeKind::Bridge: {
      std::set<int> switches;
      for (int n : bridgesBetween(t, a, b))
        if (!isRootPort(t, n)) switches.insert(switchOf(t, n));
      return switches.size() <= 1 ? PathClass::Pix : PathClass::Pxb;
    }
    case NodeKind::HostBridge:
      return PathClass::Phb;
    case NodeKind::Numa:
      return PathClass::Node;
    case NodeKind::Package: {
      int numas = 0;
      for (int c : t.children(lca)) numas += t.nodes[c].kind == NodeKind::Numa ? 1 : 0;
      return numas <= 1 ? PathClass::Node : PathClass::Sys;
    }
    case NodeKind::Machine:
      return t.packageCount() <= 1 && t.numaCount() <= 1 ? PathClass::Node : PathClass::Sys;
    default:
      return PathClass::Pix;  // one device below the other
  }
}

PathClass gpuPath(const Topology& t, int gpuA, int gpuB) {
  if (gpuA == gpuB) return PathClass::Self;
  if (static_cast<size_t>(gpuA) < t.nvlinks.size() &&
      static_cast<size_t>(gpuB) < t.nvlinks[gpuA].size() && t.nvlinks[gpuA][gpuB] > 0)
    return PathClass::NvLink;
  return classifyNodes(t, t.gpus[gpuA].node, t.gpus[gpuB].node);
}

PathClass gpuNicPath(const Topology& t, int gpu, int nic) {
  return classifyNodes(t, t.gpus[gpu].node, t.nics[nic].node);
}

}  // namespace lanes::topo
