// Which NUMA node each part of the host-staging arena should live on:
//   - rank r's input slots: rank r's GPU node (its copy engine writes them);
//   - result slots and the flags page: the node most ranks' GPUs sit on
//     (every rank writes its reduced segment and reads all of them; ties go
//     to the creator's GPU node);
//   - a sender's pair slots (send/recv): the sender's GPU node;
//   - a part whose node is unknown (-1) is left to the kernel.
// Pure (no CUDA, no syscalls): the creator applies the ranges with
// applyRanges before the pages are allocated.
#pragma once

#include <utility>
#include <vector>

#include "transport/common/numa_policy.h"
#include "transport/hoststage/arena.h"

namespace lanes {

// The node of the shared parts (results, flags); -1 when no rank's is known.
inline int stageArenaSharedNode(const std::vector<int>& rankNodes, int creator = 0) {
  const int creatorNode =
      creator >= 0 && static_cast<size_t>(creator) < rankNodes.size() ? rankNodes[creator] : -1;
  return mostCommonNode(rankNodes, creatorNode);
}

// Page-aligned, merged ranges of the segment (offsets from its start).
// rankNodes must hold one entry per rank; any other size places nothing.
inline std::vector<NumaRange> stageArenaPlacement(const StageArenaLayout& layout,
                                                  const std::vector<int>& rankNodes,
                                                  int creator = 0) {
  if (rankNodes.size() != static_cast<size_t>(layout.nranks)) return {};
  const int shared = stageArenaSharedNode(rankNodes, creator);
  std::vector<NumaRange> wanted{{0, layout.flagsBytes, shared}};
  if (layout.hostData) {
    const size_t rankBytes = static_cast<size_t>(layout.slots) * layout.chunkBytes;
    for (int r = 0; r < layout.nranks; ++r)
      wanted.push_back({layout.inputOffset(r, 0), rankBytes, rankNodes[static_cast<size_t>(r)]});
    wanted.push_back({layout.resultOffset(0), rankBytes, shared});
  }
  // A sender's pair slots sit on its GPU's node (its copy engine writes them).
  if (layout.pairBytes() > 0) {
    const size_t senderBytes = static_cast<size_t>(layout.nranks - 1) *
                               StageArenaLayout::kPairSlots * layout.pairChunkBytes;
    for (int r = 0; r < layout.nranks; ++r)
      wanted.push_back({layout.pairSlotOffset(r, r == 0 ? 1 : 0, 0), senderBytes,
                        rankNodes[static_cast<size_t>(r)]});
  }
  return pageAlignedRanges(std::move(wanted), layout.totalBytes(), StageArenaLayout::kPage);
}

}  // namespace lanes
