// Topology model helpers: tree walks, bus ids, PCIe rates.
#include "topology/model.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace lanes::topo {

namespace {
constexpr const char* kKindNames[] = {"machine", "package", "numa", "hostbridge",
                                      "bridge",  "gpu",     "nic",  "other"};
}  // namespace

const char* kindName(NodeKind kind) { return kKindNames[static_cast<int>(kind)]; }

bool parseKind(const std::string& name, NodeKind* out) {
  for (int i = 0; i < 8; ++i) {
    if (name == kKindNames[i]) {
      *out = static_cast<NodeKind>(i);
      return true;
    }
  }
  return false;
}

const char* iommuName(IommuMode m) {
  switch (m) {
    case IommuMode::Off:
      return "off";
    case IommuMode::Translating:
      return "translating";
    case IommuMode::Passthrough:
      return "passthrough";
    default:
      return "unknown";
  }
}

double pcieGbps(int gen, int width) {
  // GT/s per lane and encoding efficiency of each generation.
  static const double kRate[] = {0, 2.5, 5, 8, 16, 32, 64};
  if (gen < 1 || width < 1) return 0;
  if (gen > 6) gen = 6;
  double eff = gen <= 2 ? 0.8 : (gen == 6 ? 242.0 / 256.0 : 128.0 / 130.0);
  return kRate[gen] * eff * width / 8.0;
}

int pcieGenFromSpeed(const std::string& text) {
  double gts = std::strtod(text.c_str(), nullptr);
  if (gts <= 0) return 0;
  if (gts < 3) return 1;
  if (gts < 6) return 2;
  if (gts < 10) return 3;
  if (gts < 20) return 4;
  if (gts < 40) return 5;
  return 6;
}

std::string normalizeBusId(const std::string& busId) {
  std::string s;
  for (char c : busId) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // nvidia-smi/NVML print an 8-digit domain ("00000000:19:00.0").
  size_t colon = s.find(':');
  if (colon == std::string::npos) return s;
  // One colon: "bb:dd.f" lacks its domain; a host bridge's "dddd:bb" is whole.
  if (std::count(s.begin(), s.end(), ':') == 1)
    return s.find('.') != std::string::npos ? "0000:" + s : s.substr(colon > 4 ? colon - 4 : 0);
  if (colon > 4) s = s.substr(colon - 4);
  return s;
}

int Topology::addNode(NodeKind kind, int parent) {
  Node n;
  n.kind = kind;
  n.parent = parent;
  nodes.push_back(n);
  return static_cast<int>(nodes.size()) - 1;
}

std::vector<int> Topology::ancestors(int node) const {
  std::vector<int> out;
  for (int n = node; n >= 0 && out.size() <= nodes.size(); n = nodes[n].parent) out.push_back(n);
  return out;
}

int Topology::numaOf(int node) const {
  for (int n : ancestors(node))
    if (nodes[n].kind == NodeKind::Numa) return nodes[n].osIndex;
  return -1;
}

int Topology::packageOf(int node) const {
  for (int n : ancestors(node))
    if (nodes[n].kind == NodeKind::Package) return nodes[n].osIndex;
  return -1;
}

std::vector<int> Topology::children(int node) const {
  std::vector<int> out;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].parent == node) out.push_back(static_cast<int>(i));
  return out;
}

int Topology::findBus(const std::string& busId) const {
  std::string want = normalizeBusId(busId);
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!nodes[i].busId.empty() && nodes[i].busId == want) return static_cast<int>(i);
  return -1;
}

int Topology::numaCount() const {
  return static_cast<int>(std::count_if(nodes.begin(), nodes.end(),
                                        [](const Node& n) { return n.kind == NodeKind::Numa; }));
}

int Topology::packageCount() const {
  return static_cast<int>(std::count_if(nodes.begin(), nodes.end(),
                                        [](const Node& n) { return n.kind == NodeKind::Package; }));
}

void Topology::resizeMatrices() {
  size_t n = gpus.size();
  p2p.resize(n);
  nvlinks.resize(n);
  nvlinkGbps.resize(n);
  for (size_t i = 0; i < n; ++i) {
    p2p[i].resize(n, -1);
    nvlinks[i].resize(n, 0);
    nvlinkGbps[i].resize(n, 0);
  }
}

}  // namespace lanes::topo
