// The host-staging arena's layout with send/recv pair slots: every counter on
// its own line inside the flags pages, every pair's slots disjoint from each
// other and from the collective slots, and the NUMA placement of a sender's
// pair slots on its GPU's node.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "transport/hoststage/arena_placement.h"

namespace lanes {
namespace {

StageArenaConfig pairConfig(bool hostData) {
  StageArenaConfig c;
  c.chunkBytes = 64 * 1024;
  c.slots = 2;
  c.pairChunkBytes = 128 * 1024;
  c.hostData = hostData;
  return c;
}

TEST(StageArenaLayout, NoPairSlotsWithoutAPairChunk) {
  StageArenaConfig c = pairConfig(true);
  c.pairChunkBytes = 0;
  StageArenaLayout l(4, c);
  EXPECT_EQ(l.pairs(), 0u);
  EXPECT_EQ(l.pairBytes(), 0u);
  EXPECT_EQ(l.totalBytes(), l.resultOffset(l.slots));
}

TEST(StageArenaLayout, EveryOrderedPairHasItsOwnIndexCountersAndSlots) {
  for (int n : {2, 3, 8}) {
    for (bool hostData : {true, false}) {
      StageArenaLayout l(n, pairConfig(hostData));
      ASSERT_EQ(l.pairs(), static_cast<size_t>(n * (n - 1)));
      std::set<size_t> indices, lines;
      for (int r = 0; r < n; ++r)
        for (StageFlag f : {StageFlag::Ready, StageFlag::Reduced, StageFlag::Consumed})
          lines.insert(l.flagOffset(f, r));
      std::vector<std::pair<size_t, size_t>> slots;  // [begin, end)
      for (int s = 0; s < n; ++s) {
        for (int d = 0; d < n; ++d) {
          if (s == d) continue;
          indices.insert(l.pairIndex(s, d));
          for (PairFlag f : {PairFlag::Sent, PairFlag::Acked}) {
            const size_t off = l.pairFlagOffset(f, s, d);
            EXPECT_EQ(off % StageArenaLayout::kFlagLine, 0u);
            EXPECT_LE(off + StageArenaLayout::kFlagLine, l.flagsBytes) << "n=" << n;
            lines.insert(off);
          }
          for (int k = 0; k < StageArenaLayout::kPairSlots; ++k) {
            const size_t off = l.pairSlotOffset(s, d, k);
            slots.push_back({off, off + l.pairChunkBytes});
          }
        }
      }
      // A bijection onto [0, pairs), and no two counters on one line.
      EXPECT_EQ(indices.size(), l.pairs());
      EXPECT_EQ(*indices.rbegin(), l.pairs() - 1);
      EXPECT_EQ(lines.size(), static_cast<size_t>(3 * n) + 2 * l.pairs());
      // The pair slots tile [pairsOffset, totalBytes) without overlap, after
      // the collective slots (host data) or right after the flags (P2P).
      std::sort(slots.begin(), slots.end());
      EXPECT_EQ(slots.front().first, l.pairsOffset());
      EXPECT_EQ(l.pairsOffset(), hostData ? l.resultOffset(l.slots) : l.flagsBytes);
      for (size_t i = 1; i < slots.size(); ++i) EXPECT_EQ(slots[i].first, slots[i - 1].second);
      EXPECT_EQ(slots.back().second, l.totalBytes());
    }
  }
}

TEST(StageArenaLayout, PairSlotsInGpuMemoryLeaveOnlyTheirCounters) {
  StageArenaConfig c = pairConfig(false);
  c.pairHostData = false;  // p2p_pairs with P2P slots
  StageArenaLayout l(8, c);
  EXPECT_EQ(l.pairs(), 56u);
  EXPECT_EQ(l.pairBytes(), 0u);
  EXPECT_EQ(l.totalBytes(), l.flagsBytes);
  EXPECT_LE(l.pairFlagOffset(PairFlag::Acked, 7, 6) + StageArenaLayout::kFlagLine, l.flagsBytes);
  EXPECT_EQ(stageArenaPlacement(l, {1, 0, 0, 0, 0, 0, 0, 0}),
            (std::vector<NumaRange>{{0, l.flagsBytes, 0}}));
}

TEST(StageArenaPlacement, PairSlotsOnTheSendersNode) {
  StageArenaLayout l(2, pairConfig(false));
  // Flags on the common node (a tie: the creator's, 1); rank 0's pair slots
  // (to rank 1) on node 1 merge with them; rank 1's on node 0.
  const size_t senderBytes = StageArenaLayout::kPairSlots * l.pairChunkBytes;
  EXPECT_EQ(stageArenaPlacement(l, {1, 0}),
            (std::vector<NumaRange>{{0, l.flagsBytes + senderBytes, 1},
                                    {l.pairSlotOffset(1, 0, 0), senderBytes, 0}}));
}

}  // namespace
}  // namespace lanes
