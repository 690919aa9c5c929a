// The host algorithms' cost model: the predicted time of one collective by an
// algorithm, as the sum of three terms a user can read: latency (hops on the
// critical path times the hop latency), transfer (bytes through the slowest
// hop at its share of the host's copy rate) and reduction (bytes reduced by a
// core at its share of the reduction rate). The figures come from
// MachineFacts (measured by `lanes-topo --probe`, else assumed); docs/planner.md
// derives each formula.
#pragma once

#include <string>

#include "algorithms/algorithm.h"
#include "exec/call_facts.h"

namespace lanes {

struct CostTerms {
  double latency = 0, transfer = 0, reduce = 0;  // seconds
  double total() const { return latency + transfer + reduce; }
  // The largest term and its share: "transfer 71%".
  std::string deciding() const;
};

// The predicted time of `facts`'s collective by `algo` (which must serve it).
CostTerms hostAlgoCost(AlgoId algo, const CallFacts& facts, const MachineFacts& machine);

}  // namespace lanes
