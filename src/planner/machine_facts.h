// The cost models' machine figures (exec/call_facts.h: MachineFacts) from a
// topology: its probes where `lanes-topo --probe` measured them (on this
// machine, or in an imported JSON model), else the assumed defaults. The GPU
// figures are those of the GPU with CUDA index `cudaDev`, else of the first
// probed GPU.
#pragma once

#include "exec/call_facts.h"
#include "topology/model.h"

namespace lanes {

MachineFacts machineFactsOf(const topo::Topology& t, int cudaDev = -1);

}  // namespace lanes
