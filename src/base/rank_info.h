// Who a rank is, as the bootstrap tells every other rank.
#pragma once

#include <cstdint>

namespace lanes {

// What every rank knows of every other after the bootstrap.
struct RankInfo {
  int rank = -1;
  uint64_t hostHash = 0;  // same value <=> same host (hostname + boot id)
  int pid = 0;
  int cudaDev = -1;
  char hostname[64] = {};
};

}  // namespace lanes
