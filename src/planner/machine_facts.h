// The host cost model's machine figures (exec/call_facts.h: MachineFacts) from
// a topology: its probes where `lanes-topo --probe` measured them (on this
// machine, or in an imported JSON model), else the assumed defaults.
#pragma once

#include "exec/call_facts.h"
#include "topology/model.h"

namespace lanes {

MachineFacts machineFactsOf(const topo::Topology& t);

}  // namespace lanes
