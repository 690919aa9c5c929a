#include "planner/explain.h"

#include <algorithm>

#include "base/env.h"
#include "planner/size_rule.h"

namespace lanes {
namespace {

// Size variables as the device paths read them (a bad value is warned about
// once per process, whoever reads it first; this runs per benchmark row).
// LL's limits as src/exec/cuda/ll_allreduce.h states them: 16 KiB per rank
// by default (LANES_LL_MAX_BYTES), never above 256 KiB.
size_t llMaxBytes() {
  return static_cast<size_t>(envSize("LANES_LL_MAX_BYTES", size_t{16} << 10, 0, size_t{256} << 10));
}

// The shared-context path's limit (src/exec/cuda/context_allreduce.h).
size_t sharedContextMaxBytes() {
  return static_cast<size_t>(envSize("LANES_SHARED_CONTEXT_MAX_BYTES", size_t{256} << 10));
}

}  // namespace

std::string describePlan(const PlanQuery& q) {
  const std::string algo = algoName(chooseAlgorithm(q.coll, q.inputBytes, q.nranks).algo);
  if (!q.deviceMemory) return algo;
  // The GPU-driven paths serve single-host communicators; LL not where
  // ranks are threads of one process (exec/device_path.h, llKernelsAllowed).
  if (q.oneContext && q.coll == CollType::AllReduce && q.nranks >= 2 && q.nranks <= 8 &&
      q.inputBytes <= sharedContextMaxBytes() && !envBool("LANES_SHARED_CONTEXT_DISABLE", false) &&
      !envBool("LANES_THREAD_FASTPATH", false))
    return "shared_context";
  if (q.oneHost) {
    const bool llColl = q.coll == CollType::AllReduce || q.coll == CollType::AllGather;
    const bool llAllowed = !q.threadRanks || envBool("LANES_THREAD_FASTPATH", false);
    if (llAllowed && llColl && !envBool("LANES_LL_DISABLE", false) && q.inputBytes <= llMaxBytes())
      return "ll";
    const bool stagedColl = q.coll == CollType::AllReduce ||
                            ((q.coll == CollType::AllGather || q.coll == CollType::Broadcast ||
                              q.coll == CollType::ReduceScatter) &&
                             envBool("LANES_STAGED_COLLECTIVES", true));
    if (stagedColl && !envBool("LANES_STAGED_DISABLE", false)) return "staged";
  }
  return "proxy/" + algo;
}

}  // namespace lanes
