#include "topology/rdma_ports.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace lanes::topo {
namespace {

namespace fs = std::filesystem;

// A sysfs attribute's first line, or "" where it cannot be read (a GID
// type of an unset entry fails with EINVAL).
std::string readLine(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  if (!in || !std::getline(in, line)) return {};
  return line;
}

// Entries of a directory as sorted names (numbers compared as numbers).
std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    const bool na = !a.empty() && std::isdigit(static_cast<unsigned char>(a[0]));
    const bool nb = !b.empty() && std::isdigit(static_cast<unsigned char>(b[0]));
    if (na && nb) return std::stol(a) < std::stol(b);
    return a < b;
  });
  return names;
}

bool allZero(const std::string& gid) {
  return std::all_of(gid.begin(), gid.end(), [](char c) { return c == '0' || c == ':'; });
}

// "4: ACTIVE" -> "ACTIVE".
std::string afterColon(const std::string& s) {
  const size_t c = s.find(": ");
  return c == std::string::npos ? s : s.substr(c + 2);
}

}  // namespace

bool RdmaGid::ipv4() const {
  return address.size() == 39 && address.compare(0, 30, "0000:0000:0000:0000:0000:ffff:") == 0;
}

std::string RdmaGid::text() const {
  if (!ipv4()) return address;
  unsigned hi = 0, lo = 0;
  if (std::sscanf(address.c_str() + 30, "%4x:%4x", &hi, &lo) != 2) return address;
  char buf[64];
  std::snprintf(buf, sizeof buf, "::ffff:%u.%u.%u.%u", hi >> 8, hi & 255, lo >> 8, lo & 255);
  return buf;
}

std::vector<RdmaPort> readRdmaPorts(const std::string& root) {
  std::vector<RdmaPort> out;
  for (const std::string& dev : entries(root)) {
    const fs::path ports = fs::path(root) / dev / "ports";
    for (const std::string& num : entries(ports)) {
      const fs::path p = ports / num;
      RdmaPort port;
      port.device = dev;
      port.port = std::atoi(num.c_str());
      port.state = afterColon(readLine(p / "state"));
      port.linkLayer = readLine(p / "link_layer");
      port.rate = readLine(p / "rate");
      for (const std::string& idx : entries(p / "gids")) {
        RdmaGid gid;
        gid.index = std::atoi(idx.c_str());
        gid.address = readLine(p / "gids" / idx);
        if (gid.address.empty() || allZero(gid.address)) continue;
        gid.type = readLine(p / "gid_attrs" / "types" / idx);
        gid.netdev = readLine(p / "gid_attrs" / "ndevs" / idx);
        port.gids.push_back(gid);
      }
      out.push_back(std::move(port));
    }
  }
  return out;
}

bool hcaSelects(const std::string& spec, const std::string& device, int port) {
  size_t pos = 0;
  const bool exclude = pos < spec.size() && spec[pos] == '^';
  if (exclude) ++pos;
  const bool exact = pos < spec.size() && spec[pos] == '=';
  if (exact) ++pos;
  // As NCCL reads it: "name" or "name:port" items (the port after the first
  // colon, 0 where it is not a number, which matches no port), items without
  // a name skipped, and a list without items matching every port.
  bool anyItem = false, listed = false;
  std::stringstream list(spec.substr(pos));
  std::string item;
  while (std::getline(list, item, ',')) {
    const size_t colon = item.find(':');
    const std::string name = item.substr(0, colon);
    if (name.empty()) continue;
    anyItem = true;
    const bool anyPort = colon == std::string::npos;
    const int wanted = anyPort ? 0 : std::atoi(item.c_str() + colon + 1);
    const bool named = exact ? device == name : device.compare(0, name.size(), name) == 0;
    listed = listed || (named && (anyPort || wanted == port));
  }
  if (!anyItem) listed = true;
  return listed != exclude;
}

int chooseGid(const RdmaPort& port, int forced) {
  if (forced >= 0) {  // where the entry is set
    for (const RdmaGid& g : port.gids)
      if (g.index == forced) return forced;
    return -1;
  }
  if (!port.roce()) return 0;
  int v2 = -1;
  for (const RdmaGid& g : port.gids) {
    if (g.type != "RoCE v2") continue;
    if (g.ipv4()) return g.index;
    if (v2 < 0) v2 = g.index;
  }
  return v2;
}

std::string formatRdmaPorts(const std::vector<RdmaPort>& ports, const std::string& hcaSpec,
                            int forcedGid, const std::string& verbs) {
  std::string out = "\nRDMA ports";
  if (!hcaSpec.empty()) out += " (LANES_IB_HCA=" + hcaSpec + ")";
  out += ":\n  libibverbs: " + verbs + "\n";
  if (ports.empty()) return out + "  none (no device in /sys/class/infiniband)\n";
  for (const RdmaPort& p : ports) {
    const bool selected = hcaSelects(hcaSpec, p.device, p.port);
    const int gid = chooseGid(p, forcedGid);
    out += "  " + p.device + ":" + std::to_string(p.port) + "  " +
           (p.state.empty() ? "?" : p.state) + ", " +
           (p.roce()              ? "RoCE (Ethernet)"
            : p.linkLayer.empty() ? "?"
                                  : p.linkLayer) +
           (p.rate.empty() ? "" : ", " + p.rate) + "\n";
    for (const RdmaGid& g : p.gids)
      out += "    GID " + std::to_string(g.index) + ": " + g.text() +
             (g.type.empty() ? "" : ", " + g.type) + (g.netdev.empty() ? "" : ", " + g.netdev) +
             (g.index == gid ? "  <- used" : "") + "\n";
    std::string verdict;
    if (!selected)
      verdict = "not used: LANES_IB_HCA leaves it out";
    else if (!p.active())
      verdict = "not used: the port is not ACTIVE";
    else if (gid < 0 && forcedGid >= 0)
      verdict = "not used: GID index " + std::to_string(forcedGid) +
                " (LANES_IB_GID_INDEX) is not set on this port";
    else if (gid < 0)
      verdict =
          "not used: no RoCE v2 GID (give the interface an address, or set LANES_IB_GID_INDEX)";
    else
      verdict = "usable, GID index " + std::to_string(gid) +
                (forcedGid >= 0 ? " (LANES_IB_GID_INDEX)" : "");
    out += "    " + verdict + "\n";
  }
  return out;
}

}  // namespace lanes::topo
