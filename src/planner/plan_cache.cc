#include "planner/plan_cache.h"

namespace lanes {

AlgoChoice HostPlanCache::choose(CollType coll, size_t bytes, int nranks,
                                 const SelectionConfig& config) {
  int sizeClass = 0;
  while (sizeClass < kClasses - 1 && (size_t{1} << sizeClass) < bytes) ++sizeClass;
  const auto index = static_cast<size_t>(static_cast<int>(coll) * kClasses + sizeClass);
  if (index >= plans_.size()) return chooseHostAlgorithm(coll, bytes, nranks, config);
  std::lock_guard<std::mutex> lock(mutex_);
  std::optional<AlgoChoice>& plan = plans_[index];
  if (!plan) plan = chooseHostAlgorithm(coll, bytes, nranks, config);
  return *plan;
}

DevicePath DevicePlanCache::choose(const CallFacts& f, const SelectionConfig& config) {
  // What the costs read beyond the rank set's facts: the collective, the
  // batch's shape and the size class.
  constexpr int kMostCalls = 255;
  if (f.bytes == 0 || f.calls > kMostCalls || f.p2pCalls > kMostCalls)
    return chooseDevicePath(f, config).path;
  int sizeClass = 0;
  while (sizeClass < 63 && (size_t{1} << sizeClass) < f.bytes) ++sizeClass;
  const uint64_t key = uint64_t(f.coll) << 32 | uint64_t(f.calls) << 24 |
                       uint64_t(f.p2pCalls) << 16 | uint64_t(f.sameColl) << 9 |
                       uint64_t(f.p2p) << 8 | uint64_t(sizeClass);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = orders_.find(key);
  if (it == orders_.end()) it = orders_.emplace(key, devicePathOrder(f, config)).first;
  return chooseDevicePath(it->second, f, config);
}

}  // namespace lanes
