// Where each call ran, as the registry chose it (planner/registry.h): the
// PLAN log says it per call and the perf tools read the last one.
#pragma once

#include <string>

struct lanesComm;

namespace lanes {

// Records that `call` ("allreduce", "send") ran on `plan` ("staged",
// "proxy/ring", "ring") and logs it at TRACE under PLAN.
void notePlanOf(lanesComm* comm, const std::string& call, const std::string& plan);
// The last call's plan, "" before any.
std::string lastPlanOf(lanesComm* comm);

}  // namespace lanes
