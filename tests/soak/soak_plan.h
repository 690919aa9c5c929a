// The random operation sequence: every rank seeds the same generator, so all
// of them draw the same operations in the same order without talking.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>

#include "lanes/lanes.h"
#include "tests/multi/data.h"

namespace lanes::soak {

enum class OpKind {
  AllReduce,
  Reduce,
  Broadcast,
  AllGather,
  ReduceScatter,
  AlltoAll,
  Gather,
  Scatter,
  SendRecv,
  kCount
};
const char* opKindName(OpKind k);

struct OpSpec {
  uint64_t seq = 0;
  OpKind kind = OpKind::AllReduce;
  int comm = 0;  // index into the soak's communicators
  lanesDataType_t type = lanesFloat32;
  test::Reduction reduction = test::Reduction::Sum;
  size_t count = 1;       // elements per rank (per block for the gather/scatter family)
  uint32_t rootDraw = 0;  // root = rootDraw % (size of the rank's communicator)
  bool inPlace = false;
  uint32_t salt = 0;  // varies the data of every operation
};

class OpPlanner {
 public:
  OpPlanner(uint64_t seed, int comms, size_t maxBytes)
      : rng_(seed), comms_(comms), maxBytes_(maxBytes) {}
  OpSpec next();

 private:
  std::mt19937_64 rng_;
  int comms_;
  size_t maxBytes_;
  uint64_t seq_ = 0;
};

std::string describe(const OpSpec& op, int root);

}  // namespace lanes::soak
