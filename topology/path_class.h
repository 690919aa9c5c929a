// Path classes between two PCI devices, as `nvidia-smi topo -m` names them.
#pragma once

#include <string>
#include <vector>

#include "topology/model.h"

namespace lanes::topo {

// Ordered nearest first: a smaller value is a better path.
enum class PathClass { Self, NvLink, Pix, Pxb, Phb, Node, Sys, Unknown };

// "X", "NV4", "PIX", "PXB", "PHB", "NODE", "SYS"; nvlinks counts links for NV#.
std::string pathName(PathClass c, int nvlinks = 0);
// Accepts the names above ("NV#" -> NvLink with *nvlinks = #).
bool parsePathName(const std::string& text, PathClass* out, int* nvlinks);

// Classifies the path between two nodes of the tree (PIX = at most one PCIe
// switch between them; PXB = several, no host bridge crossed; PHB = through
// a host bridge; NODE = between host bridges of one NUMA node; SYS = across
// the inter-socket link). NVLink is not seen here: see gpuPath.
PathClass classifyNodes(const Topology& topo, int a, int b);
PathClass gpuPath(const Topology& topo, int gpuA, int gpuB);
PathClass gpuNicPath(const Topology& topo, int gpu, int nic);

// The bridges on the path between two nodes (both sides up to and including
// the common ancestor, when that is a bridge).
std::vector<int> bridgesBetween(const Topology& topo, int a, int b);

}  // namespace lanes::topo
