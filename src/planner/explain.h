// What the planner would pick for one call, as a short name for reports (the
// perf tools' JSON "plan"). Reads the same rules and LANES_* variables the
// call path does; changes no selection.
#pragma once

#include <cstddef>
#include <string>

#include "algorithms/algorithm.h"

namespace lanes {

struct PlanQuery {
  CollType coll = CollType::AllReduce;
  size_t inputBytes = 0;  // bytes of input one rank contributes (count x size;
                          // reduce-scatter: the whole send buffer)
  int nranks = 1;
  bool deviceMemory = false;
  bool threadRanks = false;  // several ranks are threads of one process
  bool oneHost = true;       // every rank on one host
  bool oneContext = false;   // every rank a thread of one process on one GPU
};

// Host memory: the algorithm ("ring", "recursive_doubling", "chain",
// "pairwise", "direct"). Device memory: the device path first,
// "shared_context", "ll" or "staged", else "proxy/<algorithm>" (the proxy thread runs the host
// schedule on staged copies).
std::string describePlan(const PlanQuery& q);

}  // namespace lanes
