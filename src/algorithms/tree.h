// The double binary tree's shape, for the schedule (tree.cc) and the cost
// model (planner/host_costs.cc): both must count the same steps and chunks.
#pragma once

#include <cstddef>

#include "base/collective.h"

namespace lanes::algo {

// Chunks each half of a tree collective is cut into: one below 64 KiB a
// half, then one per 64 KiB up to 16, so that large calls pipeline through
// the tree while small ones take the fewest steps.
int treeChunks(size_t bytes);

// The steps of one chunk through the trees of `coll` on `nranks` ranks: up
// (toward the root, reducing) and down (from it, broadcasting); a chunk k
// takes the same steps shifted by k.
// `links`: the most tree edges any one rank has, over both trees; an
// all-reduce moves half the buffer each way over each of them.
// `copies`, `reduces`: the half-buffers the busiest rank of an all-reduce
// copies (its sends, and what it receives from its parents) and reduces (what
// its children send), over both trees.
struct TreeDepth {
  int up = 0, down = 0;
  int links = 0;
  int copies = 0, reduces = 0;
};
TreeDepth treeDepth(CollType coll, int nranks);

}  // namespace lanes::algo
