// The binary tree of a channel's ranks that the bootstrap's collectives run
// on and its notices travel along: rank r's parent is (r - 1) / 2, its
// children 2r + 1 and 2r + 2. Each rank talks to at most three others, so a
// channel of N ranks needs about N control connections in all, not N^2.
// Internal to src/bootstrap.
#pragma once

#include <vector>

namespace lanes {

inline int treeParent(int rank) { return rank == 0 ? -1 : (rank - 1) / 2; }

inline std::vector<int> treeChildren(int rank, int nranks) {
  std::vector<int> out;
  for (int c = 2 * rank + 1; c <= 2 * rank + 2 && c < nranks; ++c) out.push_back(c);
  return out;
}

// Parent (if any), then children.
inline std::vector<int> treeNeighbours(int rank, int nranks) {
  std::vector<int> out;
  if (rank > 0) out.push_back(treeParent(rank));
  for (int c : treeChildren(rank, nranks)) out.push_back(c);
  return out;
}

}  // namespace lanes
