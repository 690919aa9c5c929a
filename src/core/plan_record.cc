#include "core/plan_record.h"

#include "base/log.h"
#include "core/comm.h"

namespace lanes {

void notePlanOf(lanesComm* comm, const std::string& call, const std::string& plan) {
  {
    std::lock_guard<std::mutex> lock(comm->planMutex);
    comm->lastPlanCall = call;
    comm->lastPlan = plan;
  }
  LANES_TRACE(Plan, comm->rank, "%s: %s", call.c_str(), plan.c_str());
}

void explainPlanOnce(lanesComm* comm, CollType coll, size_t bytes,
                     const std::function<std::string()>& explain) {
  if (!logEnabled(LogLevel::Info, LogSubsys::Plan)) return;
  // One line per collective and power-of-two size class.
  int sizeClass = 0;
  while (sizeClass < 63 && (size_t{1} << sizeClass) < bytes) ++sizeClass;
  const uint32_t key = static_cast<uint32_t>(coll) << 8 | static_cast<uint32_t>(sizeClass);
  {
    std::lock_guard<std::mutex> lock(comm->planMutex);
    if (!comm->explainedPlans.insert(key).second) return;
  }
  LANES_INFO(Plan, comm->rank, "%s up to %zu bytes x %d ranks: %s", collTypeName(coll),
             size_t{1} << sizeClass, comm->nranks, explain().c_str());
}

std::string lastPlanOf(lanesComm* comm) {
  std::lock_guard<std::mutex> lock(comm->planMutex);
  return comm->lastPlan;
}

}  // namespace lanes
