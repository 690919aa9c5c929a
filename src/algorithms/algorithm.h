// Algorithms turn one collective call into a Schedule for one rank. They know
// ranks, not transports. Each algorithm states which collectives it serves;
// the planner (src/planner) picks among them.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "algorithms/schedule.h"
#include "base/collective.h"
#include "base/status.h"

namespace lanes {

enum class AlgoId : uint8_t {
  Ring,               // pipelined ring: reduce-scatter + all-gather
  RecursiveDoubling,  // latency: log2(n) exchange rounds (non-powers of two fold in)
  Chain,              // pipelined chain for broadcast / reduce
  Pairwise,           // pairwise exchange for all-to-all
  Direct,             // root talks to every rank (gather, scatter)
  Tree,               // double binary tree, pipelined in chunks (algorithms/tree.h)
  Hierarchical,       // all-reduce: within hosts, across hosts per shard, within hosts
  SharedSum,          // one host: every input in one shared arena, each rank sums its segment
  HalvingDoubling,    // Rabenseifner: reduce-scatter by halving, all-gather by doubling
};
const char* algoName(AlgoId a);
bool parseAlgoName(const char* text, AlgoId* out);

// Whether `algo` implements `coll` (the planner's capability table).
bool algoSupports(AlgoId algo, CollType coll);
// Same, for a communicator of `nranks` (recursive-doubling all-gather and
// halving-doubling reduce-scatter need a power of two). buildSchedule fails
// exactly where this says false.
bool algoSupports(AlgoId algo, CollType coll, int nranks);
// Builds the schedule; InvalidUsage if the algorithm does not serve the collective.
// `ringOrder` (algorithms/ring_order.h) is the order the ring visits the
// ranks in, the same on every rank; empty: 0, 1, ..., n-1. Only the ring
// reads it; InvalidArgument if it is not empty and not a permutation of the ranks.
// `hostOf`: each rank's group for the hierarchical plans (its host, or on one
// host its CPU package), the same on every rank; empty: one group.
// Only the hierarchical algorithm reads it (InvalidUsage where hosts hold
// different numbers of ranks: hostsEven says whether they do).
Status buildSchedule(AlgoId algo, const CollArgs& args, Schedule* out,
                     std::span<const int> ringOrder = {}, std::span<const int> hostOf = {});
// The ranks of each host (rank order; hosts by their first rank) from
// `hostOf` as above; InvalidUsage where hosts hold different numbers of ranks.
Status hostGroups(std::span<const int> hostOf, int nranks, std::vector<std::vector<int>>* out);

}  // namespace lanes
