#include "core/plan_record.h"

#include "base/log.h"
#include "core/comm.h"

namespace lanes {

void notePlanOf(lanesComm* comm, const std::string& call, const std::string& plan, uint64_t bytes) {
  {
    std::lock_guard<std::mutex> lock(comm->planMutex);
    comm->lastPlanCall = call;
    comm->lastPlan = plan;
  }
  comm->flight->notePlan(plan);
  if (comm->metrics) comm->metrics->countPlan(call, plan, bytes);
  LANES_TRACE(Plan, comm->rank, "%s: %s", call.c_str(), plan.c_str());
}

void explainPlanOnce(lanesComm* comm, const std::string& what, size_t bytes,
                     const std::function<std::string()>& explain) {
  if (!logEnabled(LogLevel::Info, LogSubsys::Plan)) return;
  // One line per kind of call and power-of-two size class.
  int sizeClass = 0;
  while (sizeClass < 63 && (size_t{1} << sizeClass) < bytes) ++sizeClass;
  {
    std::lock_guard<std::mutex> lock(comm->planMutex);
    if (!comm->explainedPlans.insert(what + "/" + std::to_string(sizeClass)).second) return;
  }
  LANES_INFO(Plan, comm->rank, "%s up to %zu bytes x %d ranks: %s", what.c_str(),
             size_t{1} << sizeClass, comm->nranks, explain().c_str());
}

std::string lastPlanOf(lanesComm* comm) {
  std::lock_guard<std::mutex> lock(comm->planMutex);
  return comm->lastPlan;
}

}  // namespace lanes
