// lanes-topo --plan: where each collective would run on this machine, from
// the same selection function a call uses (planner/registry.h).
#pragma once

#include <string>

#include "topology/model.h"

namespace lanes {

// For `nranks` ranks as processes of this host, rank r on GPU r % GPUs,
// every device path set up as by default (LANES_PROTO, LANES_ALGO and the
// size variables as the environment sets them): a table of device-buffer
// plans (when the model has GPUs) and one of host-buffer plans.
std::string formatPlanTable(const topo::Topology& t, int nranks);

}  // namespace lanes
