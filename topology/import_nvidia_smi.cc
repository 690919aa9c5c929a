// Tree synthesis: devices not on a SYS path share a NUMA node, PHB-or-closer
// share a host bridge, PXB-or-closer a root port, PIX a switch. NV# pairs say
// nothing about PCIe and constrain nothing.
#include "topology/import_nvidia_smi.h"

#include <cstdlib>
#include <functional>
#include <map>
#include <numeric>
#include <sstream>

#include "topology/json_io.h"
#include "topology/path_class.h"

namespace lanes::topo {

namespace {

std::string stripAnsi(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\x1b') {
      while (i < s.size() && !std::isalpha(static_cast<unsigned char>(s[i]))) ++i;
      continue;
    }
    out += s[i];
  }
  return out;
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

bool isDevice(const std::string& w, const char* prefix) {
  size_t n = std::char_traits<char>::length(prefix);
  return w.size() > n && w.compare(0, n, prefix) == 0 &&
         w.find_first_not_of("0123456789", n) == std::string::npos;
}

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

}  // namespace

Status parseNvidiaSmiTopo(const std::string& text, Topology* out) {
  std::vector<std::string> cols;  // device columns of the header
  std::vector<std::vector<std::string>> rows;
  std::map<std::string, std::string> nicNames;
  std::istringstream in(stripAnsi(text));
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> w = words(line);
    if (w.empty()) continue;
    if (cols.empty() && (isDevice(w[0], "GPU") || isDevice(w[0], "NIC")) && w.size() > 1 &&
        !(w[1] == "X" || w[1] == "PIX")) {
      for (const auto& x : w)
        if (isDevice(x, "GPU") || isDevice(x, "NIC")) cols.push_back(x);
      continue;
    }
    if (w.size() == 2 && w[0].back() == ':' && isDevice(w[0].substr(0, w[0].size() - 1), "NIC")) {
      nicNames[w[0].substr(0, w[0].size() - 1)] = w[1];
      continue;
    }
    if (!cols.empty() && (isDevice(w[0], "GPU") || isDevice(w[0], "NIC")) && w.size() > cols.size())
      rows.push_back(w);
  }
  if (cols.empty() || rows.size() != cols.size())
    return invalidArgument("not the output of `nvidia-smi topo -m`: found " +
                           std::to_string(cols.size()) + " device columns and " +
                           std::to_string(rows.size()) + " device rows");
  const int n = static_cast<int>(cols.size());
  std::vector<std::vector<PathClass>> cls(n, std::vector<PathClass>(n));
  std::vector<std::vector<int>> nv(n, std::vector<int>(n, 0));
  for (int r = 0; r < n; ++r) {
    if (rows[r][0] != cols[r])
      return invalidArgument("row " + rows[r][0] + " does not match column " + cols[r]);
    for (int c = 0; c < n; ++c)
      if (!parsePathName(rows[r][c + 1], &cls[r][c], &nv[r][c]))
        return invalidArgument("unknown path class \"" + rows[r][c + 1] + "\" in row " + cols[r]);
  }
  std::vector<int> numa(n, -1);
  std::vector<std::string> cpus(n);
  for (int r = 0; r < n; ++r) {
    if (rows[r].size() > static_cast<size_t>(n + 1) && rows[r][n + 1] != "N/A")
      cpus[r] = rows[r][n + 1];
    if (rows[r].size() > static_cast<size_t>(n + 2) && rows[r][n + 2] != "N/A")
      numa[r] = std::atoi(rows[r][n + 2].c_str());
  }
  auto within = [&](PathClass limit) {
    return [&, limit](int a, int b) {
      return cls[a][b] != PathClass::NvLink && cls[a][b] <= limit && cls[b][a] != PathClass::NvLink;
    };
  };
  Topology t;
  t.addNode(NodeKind::Machine, -1);
  std::vector<int> all(n), nodeOf(n, -1);
  std::iota(all.begin(), all.end(), 0);
  auto addBridge = [&](int parent) { return t.addNode(NodeKind::Bridge, parent); };
  int socket = 0;
  for (const auto& sock : groups(all, within(PathClass::Node))) {
    int os = socket;
    for (int d : sock)
      if (numa[d] >= 0) os = numa[d];
    int pkg = t.addNode(NodeKind::Package, 0);
    t.nodes[pkg].osIndex = socket++;
    int nn = t.addNode(NodeKind::Numa, pkg);
    t.nodes[nn].osIndex = os;
    for (int d : sock)
      if (!cpus[d].empty()) t.nodes[nn].name = cpus[d];
    for (const auto& hb : groups(sock, within(PathClass::Phb))) {
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
  for (int d = 0; d < n; ++d) {
    bool gpu = cols[d].compare(0, 3, "GPU") == 0;
    int node = t.addNode(gpu ? NodeKind::Gpu : NodeKind::Nic, nodeOf[d]);
    if (gpu) {
      Gpu g;
      g.node = node;
      g.cpus = cpus[d];
      t.gpus.push_back(g);
    } else {
      Nic nic;
      nic.node = node;
      nic.name = nicNames.count(cols[d]) ? nicNames[cols[d]] : cols[d];
      t.nics.push_back(nic);
    }
  }
  t.resizeMatrices();
  std::vector<int> gpuIdx;
  for (int d = 0; d < n; ++d)
    if (cols[d].compare(0, 3, "GPU") == 0) gpuIdx.push_back(d);
  for (size_t a = 0; a < gpuIdx.size(); ++a)
    for (size_t b = 0; b < gpuIdx.size(); ++b) t.nvlinks[a][b] = nv[gpuIdx[a]][gpuIdx[b]];
  t.sources.push_back("nvidia-smi");
  t.missing.push_back(
      "nvidia-smi import: PCIe link training, bus ids, BAR1 and ACS are not in "
      "`nvidia-smi topo -m`; bridges and host bridges are synthesised");
  for (size_t g = 0; g < t.gpus.size(); ++g) {
    int numaOs = t.numaOf(t.gpus[g].node);
    t.gpus[g].numa = numaOs;
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
