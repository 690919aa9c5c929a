// The order in which a ring visits the ranks: ranks of one host together,
// within a host those of one CPU package, within a package those of one NUMA
// node, so the ring crosses the hosts' links and the socket link as few times
// as a ring can. It depends only on every rank's placement, exchanged at init,
// so every rank computes the same order.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace lanes {

// Where one rank sits, as the ring order sees it. Unknown values (host 0,
// package or NUMA node -1) are one more value: ranks that all say "unknown"
// form one group.
struct RingPlace {
  uint64_t host = 0;  // host hash
  int package = -1;   // CPU package
  int numa = -1;      // NUMA node
};

// A permutation of 0..n-1: position p of the ring holds rank order[p], which
// sends to order[p+1] and receives from order[p-1] (around). Groups go in
// the order of their lowest rank (hosts, then packages inside a host, then
// NUMA nodes inside a package), ranks keep their order inside a group, and
// rank 0 comes first. The identity when every rank is in one group, or when
// rank order crosses no more often (grouped already, around the ring).
std::vector<int> ringOrder(std::span<const RingPlace> places);

// Whether `order` is 0, 1, ..., n-1 (an empty order counts as one).
bool isIdentityOrder(std::span<const int> order);
// Whether `order` is a permutation of 0..n-1.
bool isPermutation(std::span<const int> order, int n);

// The ring's links (order[p] -> order[p+1], the last back to the first) that
// cross between hosts, between packages of one host, and between NUMA nodes
// of one package. An empty order is the identity.
struct RingCrossings {
  int hosts = 0;
  int packages = 0;
  int numa = 0;
};
RingCrossings ringCrossings(std::span<const RingPlace> places, std::span<const int> order);

// What the INFO log says about a non-identity order, e.g.
// "ring order 0 2 4 6 1 3 5 7 (2 packages: 2 socket crossings instead of 8)";
// "" for the identity.
std::string describeRingOrder(std::span<const RingPlace> places, std::span<const int> order);

}  // namespace lanes
