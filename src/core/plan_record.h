// Where each call ran, as the registry chose it (planner/registry.h): the
// PLAN log says it per call and the perf tools read the last one.
#pragma once

#include <functional>
#include <string>

#include "base/collective.h"

struct lanesComm;

namespace lanes {

// Records that `call` ("allreduce", "send") of `bytes` ran on `plan`
// ("staged", "proxy/ring", "ring"): the flight recorder's entry and the
// metrics (where on) take it, and it is logged at TRACE under PLAN.
void notePlanOf(lanesComm* comm, const std::string& call, const std::string& plan, uint64_t bytes);
// At INFO with subsystem PLAN: logs `explain()` (the choice, the next two
// candidates with their predicted times and the deciding term) once per
// communicator, kind of call (`what`: "allreduce", "allreduce on device
// buffers") and power-of-two size class.
void explainPlanOnce(lanesComm* comm, const std::string& what, size_t bytes,
                     const std::function<std::string()>& explain);
// The last call's plan, "" before any.
std::string lastPlanOf(lanesComm* comm);

}  // namespace lanes
