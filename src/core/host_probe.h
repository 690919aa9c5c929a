// The host part of lanes-topo --probe and of the probe at first use
// (core/first_use_probe.h): the figures the host algorithms' cost
// model reads (planner/host_costs.h), measured through Lanes itself where a
// Lanes path is what is priced (a shared-memory hop between two thread ranks)
// and directly where it is the CPU (the reduction kernel, memcpy on every core).
#pragma once

#include "base/status.h"
#include "topology/model.h"

namespace lanes {

// Runs in seconds; the hop figures need two free cores to be exact
// (fewer: the measured latency includes time slices, as it will in use).
// Where `t` has two CPU packages with CPU lists, a hop across them is timed
// too, a rank pinned to a CPU of each.
Status measureHostProbe(const topo::Topology& t, topo::HostProbe* out);

}  // namespace lanes
