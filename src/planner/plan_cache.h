// A communicator's host choices, kept per collective and size class: the
// cost model runs once per class (planner/registry.h), not once per call.
#pragma once

#include <array>
#include <mutex>
#include <optional>

#include "planner/registry.h"

namespace lanes {

class HostPlanCache {
 public:
  // chooseHostAlgorithm for the call, remembered for its size class. The
  // config and rank count must be the communicator's, the same every call.
  AlgoChoice choose(CollType coll, size_t bytes, int nranks, const SelectionConfig& config);

 private:
  static constexpr int kCollectives = 8;
  static constexpr int kClasses = 64;
  std::mutex mutex_;
  std::array<std::optional<AlgoChoice>, kCollectives * kClasses> plans_;
};

}  // namespace lanes
