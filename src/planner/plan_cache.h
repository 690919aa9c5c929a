// A communicator's choices, kept per kind of call and size class: the cost
// models run once per class (planner/registry.h), not once per call.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

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

class DevicePlanCache {
 public:
  // chooseDevicePath for the batch: the paths' order by predicted time is
  // remembered per kind of batch and size class, and the first that the
  // batch's own facts make eligible and `config` allows is taken. The config
  // and the rank set's facts must be the communicator's, the same every call.
  DevicePath choose(const CallFacts& facts, const SelectionConfig& config);

 private:
  std::mutex mutex_;
  std::map<uint64_t, std::vector<DevicePath>> orders_;
};

}  // namespace lanes
