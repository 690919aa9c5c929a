#include "planner/explain.h"

#include "core/env.h"
#include "planner/size_rule.h"

namespace lanes {
namespace {

// LL's limits as src/exec/cuda/ll_allreduce.h states them: 16 KiB per rank
// by default (LANES_LL_MAX_BYTES), never above 256 KiB.
size_t llMaxBytes() {
  constexpr size_t kDefault = size_t{16} << 10, kHard = size_t{256} << 10;
  uint64_t v = kDefault;
  if (auto text = envString("LANES_LL_MAX_BYTES")) {
    if (!parseSize(*text, &v)) v = kDefault;
  }
  return v < kHard ? static_cast<size_t>(v) : kHard;
}

}  // namespace

std::string describePlan(const PlanQuery& q) {
  const std::string algo = algoName(chooseAlgorithm(q.coll, q.inputBytes, q.nranks).algo);
  if (!q.deviceMemory) return algo;
  // The GPU-driven paths serve single-host communicators without thread
  // ranks (exec/device_path.h, gpuDrivenPathsAllowed).
  const bool gpuDriven = q.oneHost && (!q.threadRanks || envBool("LANES_THREAD_FASTPATH", false));
  if (gpuDriven) {
    const bool llColl = q.coll == CollType::AllReduce || q.coll == CollType::AllGather;
    if (llColl && !envBool("LANES_LL_DISABLE", false) && q.inputBytes <= llMaxBytes()) return "ll";
    if (q.coll == CollType::AllReduce && !envBool("LANES_STAGED_DISABLE", false)) return "staged";
  }
  return "proxy/" + algo;
}

}  // namespace lanes
