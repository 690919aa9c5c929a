#include "transport/common/numa_policy.h"

#include <linux/mempolicy.h>  // MPOL_* (kernel uapi: no libnuma needed)
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>

namespace lanes {
namespace {

constexpr int kBitsPerWord = 64;
// The kernel refuses node masks longer than one page of bits.
constexpr int kMaxNodeIndex = 4096 * 8 - 1;

std::string nodeListText(const std::vector<int>& nodes) {
  std::string text;
  for (int n : nodes) text += (text.empty() ? "" : ",") + std::to_string(n);
  return text.empty() ? "none" : text;
}

}  // namespace

bool parseNodeList(const std::string& text, std::vector<int>* nodes) {
  nodes->clear();
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    item.erase(std::remove_if(item.begin(), item.end(),
                              [](unsigned char c) { return std::isspace(c) != 0; }),
               item.end());
    if (item.empty()) continue;
    int lo = 0, hi = 0;
    char dash = 0;
    std::stringstream part(item);
    if (!(part >> lo) || lo < 0) return false;
    hi = lo;
    if (part >> dash) {
      if (dash != '-' || !(part >> hi) || hi < lo) return false;
    }
    if (!part.eof() && part.peek() != EOF) return false;
    for (int n = lo; n <= hi; ++n) nodes->push_back(n);
  }
  return !nodes->empty();
}

std::vector<int> onlineNumaNodes() {
  std::ifstream file("/sys/devices/system/node/online");
  std::string text;
  std::vector<int> nodes;
  if (!file || !std::getline(file, text) || !parseNodeList(text, &nodes)) return {};
  return nodes;
}

Status applyPreferredNode(void* addr, size_t bytes, int node) {
  if (node < 0 || node > kMaxNodeIndex)
    return invalidArgument("NUMA node " + std::to_string(node) + " is not a valid node number");
  if (reinterpret_cast<uintptr_t>(addr) % static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE)) != 0)
    return invalidArgument("NUMA placement needs a page-aligned address");
  if (bytes == 0) return Status::ok();
  std::vector<unsigned long> mask(static_cast<size_t>(node / kBitsPerWord + 1), 0);
  mask[static_cast<size_t>(node / kBitsPerWord)] = 1UL << (node % kBitsPerWord);
  // maxnode counts one past the last bit the kernel reads (it drops one).
  const unsigned long maxnode = mask.size() * kBitsPerWord + 1;
  if (::syscall(SYS_mbind, addr, bytes, MPOL_PREFERRED, mask.data(), maxnode, 0) != 0) {
    int err = errno;
    return systemError("mbind(MPOL_PREFERRED, node " + std::to_string(node) + ") of " +
                       std::to_string(bytes) + " bytes failed: " + errnoText(err) +
                       (err == EPERM ? " (a container needs CAP_SYS_NICE or a seccomp profile "
                                       "that allows mbind)"
                                     : ""));
  }
  return Status::ok();
}

Status preferNode(void* addr, size_t bytes, int node) {
  if (node < 0) return Status::ok();  // the GPU's node is unknown
  const std::vector<int> online = onlineNumaNodes();
  if (!online.empty() && std::find(online.begin(), online.end(), node) == online.end())
    return invalidArgument("NUMA node " + std::to_string(node) +
                           " is not online on this host (online: " + nodeListText(online) +
                           "); a topology file (LANES_TOPO_FILE) from another machine?");
  if (online.size() <= 1) return Status::ok();  // one node: nothing to choose
  return applyPreferredNode(addr, bytes, node);
}

int nodeOfPage(const void* addr) {
  int node = -1;
  if (::syscall(SYS_get_mempolicy, &node, nullptr, 0UL, addr, MPOL_F_NODE | MPOL_F_ADDR) != 0)
    return -1;
  return node;
}

std::vector<NumaRange> pageAlignedRanges(std::vector<NumaRange> wanted, size_t totalBytes,
                                         size_t pageBytes) {
  auto roundUp = [pageBytes](size_t v) { return (v + pageBytes - 1) / pageBytes * pageBytes; };
  std::sort(wanted.begin(), wanted.end(),
            [](const NumaRange& a, const NumaRange& b) { return a.offset < b.offset; });
  const size_t end = roundUp(totalBytes);
  std::vector<NumaRange> out;
  for (const NumaRange& w : wanted) {
    if (w.node < 0 || w.bytes == 0) continue;
    // Pages whose first byte lies in [offset, offset + bytes).
    const size_t first = roundUp(w.offset);
    const size_t last = std::min(roundUp(w.offset + w.bytes), end);
    if (first >= last) continue;
    if (!out.empty() && out.back().node == w.node && out.back().offset + out.back().bytes == first)
      out.back().bytes += last - first;
    else
      out.push_back({first, last - first, w.node});
  }
  return out;
}

Status applyRanges(void* base, const std::vector<NumaRange>& ranges) {
  Status first = Status::ok();
  for (const NumaRange& r : ranges) {
    Status s = preferNode(static_cast<std::byte*>(base) + r.offset, r.bytes, r.node);
    if (!s && first) first = s;
  }
  return first;
}

std::string describeRankNodes(const std::vector<int>& rankNodes, const char* what) {
  std::string text;
  for (size_t r = 0; r < rankNodes.size(); ++r) {
    if (!text.empty()) text += ", ";
    text += "rank " + std::to_string(r) + " " + what + " on " +
            (rankNodes[r] < 0 ? std::string("an unknown node")
                              : "NUMA node " + std::to_string(rankNodes[r]));
  }
  return text;
}

int mostCommonNode(const std::vector<int>& nodes, int prefer) {
  std::map<int, int> count;
  for (int n : nodes)
    if (n >= 0) ++count[n];
  int best = -1, bestCount = 0;
  for (const auto& [node, c] : count) {  // ascending: ties keep the lowest
    if (c > bestCount) best = node, bestCount = c;
  }
  if (prefer >= 0 && count.count(prefer) && count[prefer] == bestCount) return prefer;
  return best;
}

}  // namespace lanes
