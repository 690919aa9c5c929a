// A first-order time model (latency + bytes / bandwidth per step) of one
// operation, for lanesGroupSimulateEnd. Its constants are typical of the hop
// classes Lanes uses, not measured on this box: the planner's measured cost
// model replaces them.
#pragma once

#include <cstddef>

#include "algorithms/algorithm.h"

namespace lanes {

enum class HopClass { Local, SharedMemory, Socket, DeviceStaged };

struct CostQuery {
  bool pointToPoint = false;
  CollType coll = CollType::AllReduce;
  size_t bytes = 0;  // bytes of this rank's larger buffer (send or receive)
  int nranks = 1;
  HopClass hop = HopClass::SharedMemory;  // the slowest hop of this rank
};

double predictSeconds(const CostQuery& q);

}  // namespace lanes
