// The ring order (algorithms/ring_order.h): ranks grouped by host, package and
// NUMA node, stable inside a group, rank 0's group first, the identity when
// nothing is known; and the crossing counts the INFO log reports.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "algorithms/ring_order.h"

namespace lanes {
namespace {

using Order = std::vector<int>;

// A dual-socket 8-GPU box whose ranks alternate sockets (0, 1, 0, 1, ...).
std::vector<RingPlace> alternatingSockets() {
  std::vector<RingPlace> p;
  for (int r = 0; r < 8; ++r) p.push_back({0x1234, r % 2, r % 2});
  return p;
}

TEST(RingOrder, AlternatingSocketsCrossTwice) {
  const auto places = alternatingSockets();
  const Order order = ringOrder(places);
  EXPECT_EQ(order, (Order{0, 2, 4, 6, 1, 3, 5, 7}));
  const RingCrossings before = ringCrossings(places, {});
  EXPECT_EQ(before.packages, 8);
  EXPECT_EQ(before.hosts, 0);
  const RingCrossings now = ringCrossings(places, order);
  EXPECT_EQ(now.packages, 2);
  EXPECT_EQ(now.hosts, 0);
  EXPECT_EQ(now.numa, 0);  // NUMA nodes follow the packages: counted as package crossings
  EXPECT_EQ(describeRingOrder(places, order),
            "ring order 0 2 4 6 1 3 5 7 (2 packages: 2 socket crossings instead of 8)");
}

TEST(RingOrder, TwoPackagesTwoNumaNodesEach) {
  // 8 ranks: package r % 2, and inside a package NUMA node (r / 2) % 2, so
  // rank order visits package 0 node 0, package 1 node 2, package 0 node 1, ...
  std::vector<RingPlace> places;
  for (int r = 0; r < 8; ++r) {
    const int pkg = r % 2;
    places.push_back({7, pkg, pkg * 2 + (r / 2) % 2});
  }
  const Order order = ringOrder(places);
  // Package 0: node 0 (ranks 0, 4), node 1 (2, 6); package 1: node 2 (1, 5), node 3 (3, 7).
  EXPECT_EQ(order, (Order{0, 4, 2, 6, 1, 5, 3, 7}));
  const RingCrossings now = ringCrossings(places, order);
  EXPECT_EQ(now.packages, 2);
  EXPECT_EQ(now.numa, 2);  // one inside each package
  const RingCrossings before = ringCrossings(places, {});
  EXPECT_EQ(before.packages, 8);
  EXPECT_EQ(describeRingOrder(places, order),
            "ring order 0 4 2 6 1 5 3 7 (2 packages: 2 socket crossings instead of 8)");
}

TEST(RingOrder, TwoHostsInterleaved) {
  // 2 hosts x 4 ranks, ranks alternating hosts; both hosts single-socket.
  std::vector<RingPlace> places;
  for (int r = 0; r < 8; ++r) places.push_back({r % 2 ? 0xBBBBull : 0xAAAAull, 0, 0});
  const Order order = ringOrder(places);
  EXPECT_EQ(order, (Order{0, 2, 4, 6, 1, 3, 5, 7}));
  EXPECT_EQ(ringCrossings(places, {}).hosts, 8);
  EXPECT_EQ(ringCrossings(places, order).hosts, 2);  // the fewest a ring over 2 hosts can have
  EXPECT_EQ(ringCrossings(places, order).packages, 0);
  EXPECT_EQ(describeRingOrder(places, order),
            "ring order 0 2 4 6 1 3 5 7 (2 hosts: 2 host crossings instead of 8)");
}

TEST(RingOrder, HostsBeforePackages) {
  // 2 hosts, each dual-socket; hosts by rank / 4 reversed for the second
  // half, sockets alternating: hosts stay contiguous, and inside each host
  // its packages do.
  std::vector<RingPlace> places;
  for (int r = 0; r < 8; ++r) places.push_back({(r % 4) < 2 ? 1ull : 2ull, r % 2, r % 2});
  // host 1: ranks 0, 1, 4, 5; host 2: ranks 2, 3, 6, 7.
  const Order order = ringOrder(places);
  EXPECT_EQ(order, (Order{0, 4, 1, 5, 2, 6, 3, 7}));
  const RingCrossings now = ringCrossings(places, order);
  EXPECT_EQ(now.hosts, 2);
  EXPECT_EQ(now.packages, 2);  // one inside each host
}

TEST(RingOrder, RankZeroGroupFirstAndStable) {
  // Rank 0 sits on package 1; the group of package 0 starts at rank 1.
  const std::vector<RingPlace> places = {{5, 1, 1}, {5, 0, 0}, {5, 1, 1}, {5, 0, 0}, {5, 1, 1}};
  EXPECT_EQ(ringOrder(places), (Order{0, 2, 4, 1, 3}));
}

TEST(RingOrder, GroupedAroundTheRingIsIdentity) {
  // Ranks 0 and 3 share package 0: rank order already crosses only twice.
  const std::vector<RingPlace> places = {{9, 0, 0}, {9, 1, 1}, {9, 1, 1}, {9, 0, 0}};
  EXPECT_TRUE(isIdentityOrder(ringOrder(places)));
  EXPECT_EQ(ringCrossings(places, {}).packages, 2);
  // Not so with one more rank on package 1 after rank 3.
  const std::vector<RingPlace> five = {{9, 0, 0}, {9, 1, 1}, {9, 1, 1}, {9, 0, 0}, {9, 1, 1}};
  EXPECT_EQ(ringOrder(five), (Order{0, 3, 1, 2, 4}));
}

TEST(RingOrder, AllUnknownIsIdentity) {
  const std::vector<RingPlace> places(8);  // host 0, package -1, NUMA -1
  const Order order = ringOrder(places);
  EXPECT_TRUE(isIdentityOrder(order));
  EXPECT_EQ(describeRingOrder(places, order), "");
  EXPECT_EQ(ringCrossings(places, order).packages, 0);
}

TEST(RingOrder, SingleGroupIsIdentity) {
  const std::vector<RingPlace> places(5, RingPlace{42, 0, 0});
  EXPECT_TRUE(isIdentityOrder(ringOrder(places)));
  // Already grouped: contiguous packages keep rank order too.
  std::vector<RingPlace> grouped;
  for (int r = 0; r < 8; ++r) grouped.push_back({42, r / 4, r / 4});
  EXPECT_TRUE(isIdentityOrder(ringOrder(grouped)));
  EXPECT_EQ(ringCrossings(grouped, {}).packages, 2);
}

TEST(RingOrder, SmallCommunicators) {
  EXPECT_TRUE(ringOrder(std::vector<RingPlace>{}).empty());
  EXPECT_EQ(ringOrder(std::vector<RingPlace>{{1, 0, 0}}), (Order{0}));
  const std::vector<RingPlace> two = {{1, 0, 0}, {1, 1, 1}};
  EXPECT_EQ(ringOrder(two), (Order{0, 1}));
  EXPECT_EQ(ringCrossings(two, {}).packages, 2);  // 0 -> 1 and back
  const std::vector<RingPlace> one = {{1, 0, 0}};
  EXPECT_EQ(ringCrossings(one, {}).packages, 0);
}

TEST(RingOrder, CrossingCountsAndPermutationCheck) {
  const auto places = alternatingSockets();
  EXPECT_EQ(ringCrossings(places, Order{0, 1, 2, 3, 4, 5, 6, 7}).packages, 8);
  EXPECT_EQ(ringCrossings(places, Order{0, 2, 1, 3, 4, 6, 5, 7}).packages, 4);
  EXPECT_EQ(ringCrossings(places, Order{1, 3, 5, 7, 0, 2, 4, 6}).packages, 2);
  EXPECT_TRUE(isPermutation(Order{2, 0, 1}, 3));
  EXPECT_FALSE(isPermutation(Order{0, 0, 1}, 3));
  EXPECT_FALSE(isPermutation(Order{0, 1}, 3));
  EXPECT_FALSE(isPermutation(Order{0, 1, 3}, 3));
  EXPECT_TRUE(isIdentityOrder(Order{}));
  EXPECT_FALSE(isIdentityOrder(Order{1, 0}));
}

// Every rank computes its order from the same exchanged placement: the
// answer is a function of that alone, a permutation, grouped.
TEST(RingOrder, GroupsAreContiguousForManyPlacements) {
  uint64_t x = 12345;
  auto next = [&] {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return x >> 33;
  };
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + int(next() % 16);
    std::vector<RingPlace> places;
    for (int r = 0; r < n; ++r) {
      const int pkg = int(next() % 3) - 1;
      places.push_back({next() % 2, pkg, pkg < 0 ? -1 : pkg * 2 + int(next() % 2)});
    }
    const Order order = ringOrder(places);
    ASSERT_TRUE(isPermutation(order, n));
    ASSERT_EQ(order, ringOrder(places));
    if (n > 0) {
      EXPECT_EQ(order[0], 0);
    }
    // Each host, each (host, package) and each (host, package, node) forms
    // one run around the ring.
    auto runs = [&](auto same) {
      int count = 0;
      for (int p = 0; p < n; ++p)
        if (!same(places[order[(p + n - 1) % n]], places[order[p]])) ++count;
      return count == 0 ? 1 : count;
    };
    auto distinct = [&](auto same) {
      int count = 0;
      for (int r = 0; r < n; ++r) {
        bool seen = false;
        for (int q = 0; q < r && !seen; ++q) seen = same(places[q], places[r]);
        count += seen ? 0 : 1;
      }
      return count;
    };
    auto sameHost = [](const RingPlace& a, const RingPlace& b) { return a.host == b.host; };
    auto samePkg = [](const RingPlace& a, const RingPlace& b) {
      return a.host == b.host && a.package == b.package;
    };
    auto sameNode = [](const RingPlace& a, const RingPlace& b) {
      return a.host == b.host && a.package == b.package && a.numa == b.numa;
    };
    EXPECT_EQ(runs(sameHost), distinct(sameHost));
    EXPECT_EQ(runs(samePkg), distinct(samePkg));
    EXPECT_EQ(runs(sameNode), distinct(sameNode));
    // Stable inside a group.
    for (int p = 1; p < n; ++p)
      if (sameNode(places[order[p - 1]], places[order[p]])) {
        EXPECT_LT(order[p - 1], order[p]);
      }
    // Never more crossings than rank order.
    const RingCrossings now = ringCrossings(places, order), before = ringCrossings(places, {});
    EXPECT_LE(now.hosts, before.hosts);
    EXPECT_LE(now.hosts + now.packages, before.hosts + before.packages);
  }
}

}  // namespace
}  // namespace lanes
