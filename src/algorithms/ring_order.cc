// The ring order: a stable sort of the ranks by (host, package, NUMA node),
// each level keyed by the lowest rank of its group, so rank 0's group leads
// and ranks keep their order inside a group; rank order itself where that
// crosses no more often.
#include "algorithms/ring_order.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

namespace lanes {
namespace {

int crossingsOf(std::span<const RingPlace> places, std::span<const int> order, int level) {
  const int n = static_cast<int>(places.size());
  int count = 0;
  for (int p = 0; p < n && n > 1; ++p) {
    const RingPlace& a = places[order.empty() ? p : order[p]];
    const int q = (p + 1) % n;
    const RingPlace& b = places[order.empty() ? q : order[q]];
    const bool host = a.host != b.host;
    const bool package = !host && a.package != b.package;
    const bool numa = !host && !package && a.numa != b.numa;
    count += (level == 0 ? host : level == 1 ? package : numa) ? 1 : 0;
  }
  return count;
}

}  // namespace

std::vector<int> ringOrder(std::span<const RingPlace> places) {
  const int n = static_cast<int>(places.size());
  // The lowest rank of each host, of each package of a host, of each NUMA
  // node of a package: ranks come in rank order, so the first seen is lowest.
  std::map<uint64_t, int> hostLead;
  std::map<std::pair<uint64_t, int>, int> packageLead;
  std::map<std::tuple<uint64_t, int, int>, int> numaLead;
  for (int r = 0; r < n; ++r) {
    const RingPlace& p = places[r];
    hostLead.emplace(p.host, r);
    packageLead.emplace(std::pair{p.host, p.package}, r);
    numaLead.emplace(std::tuple{p.host, p.package, p.numa}, r);
  }
  auto key = [&](int r) {
    const RingPlace& p = places[r];
    return std::tuple{hostLead.at(p.host), packageLead.at({p.host, p.package}),
                      numaLead.at({p.host, p.package, p.numa}), r};
  };
  std::vector<int> order(n);
  for (int r = 0; r < n; ++r) order[r] = r;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b); });
  // Rank order may already be grouped around the ring (0 and n-1 are
  // neighbours): then keep it, and the reduction order with it.
  const RingCrossings sorted = ringCrossings(places, order), plain = ringCrossings(places, {});
  if (sorted.hosts == plain.hosts && sorted.packages == plain.packages && sorted.numa == plain.numa)
    for (int r = 0; r < n; ++r) order[r] = r;
  return order;
}

bool isIdentityOrder(std::span<const int> order) {
  for (size_t p = 0; p < order.size(); ++p)
    if (order[p] != static_cast<int>(p)) return false;
  return true;
}

bool isPermutation(std::span<const int> order, int n) {
  if (n < 0 || order.size() != static_cast<size_t>(n)) return false;
  std::vector<bool> seen(n, false);
  for (int r : order) {
    if (r < 0 || r >= n || seen[r]) return false;
    seen[r] = true;
  }
  return true;
}

RingCrossings ringCrossings(std::span<const RingPlace> places, std::span<const int> order) {
  return {crossingsOf(places, order, 0), crossingsOf(places, order, 1),
          crossingsOf(places, order, 2)};
}

std::string describeRingOrder(std::span<const RingPlace> places, std::span<const int> order) {
  if (isIdentityOrder(order)) return "";
  std::string text = "ring order";
  for (int r : order) text += " " + std::to_string(r);
  std::set<uint64_t> hosts;
  std::set<std::pair<uint64_t, int>> packages;
  std::set<std::tuple<uint64_t, int, int>> nodes;
  for (const RingPlace& p : places) {
    hosts.insert(p.host);
    packages.insert({p.host, p.package});
    nodes.insert({p.host, p.package, p.numa});
  }
  const RingCrossings now = ringCrossings(places, order), before = ringCrossings(places, {});
  std::string parts;
  auto part = [&](size_t groups, const char* groupName, int crossings, int identity,
                  const char* crossingName) {
    if (crossings >= identity) return;  // (NUMA crossings may grow where sockets shrink)
    if (!parts.empty()) parts += "; ";
    parts += std::to_string(groups) + " " + groupName + ": " + std::to_string(crossings) + " " +
             crossingName + " crossings instead of " + std::to_string(identity);
  };
  part(hosts.size(), "hosts", now.hosts, before.hosts, "host");
  part(packages.size(), "packages", now.packages, before.packages, "socket");
  part(nodes.size(), "NUMA nodes", now.numa, before.numa, "NUMA");
  if (parts.empty()) parts = "no fewer crossings than rank order";
  return text + " (" + parts + ")";
}

}  // namespace lanes
