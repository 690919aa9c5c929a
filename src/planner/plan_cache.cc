#include "planner/host_plan_cache.h"

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

}  // namespace lanes
