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

std::string lastPlanOf(lanesComm* comm) {
  std::lock_guard<std::mutex> lock(comm->planMutex);
  return comm->lastPlan;
}

}  // namespace lanes
