// The interim planner: a size rule per collective (the planner issue replaces
// it with scored candidates). LANES_ALGO forces an algorithm where it applies.
#pragma once

#include <cstddef>
#include <string>

#include "algorithms/algorithm.h"

namespace lanes {

struct AlgoChoice {
  AlgoId algo;
  std::string why;  // for the PLAN log
};

AlgoChoice chooseAlgorithm(CollType coll, size_t bytes, int nranks);

}  // namespace lanes
