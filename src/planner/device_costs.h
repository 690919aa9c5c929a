// The device paths' cost model: the predicted time of a batch of device-buffer
// calls on one path, in the same three terms as the host algorithms'
// (planner/host_costs.h): latency (kernel launches and stream counters on the
// critical path), transfer (bytes over the GPU's link at the copy engines'
// measured rate for the copies' size, shared by the ranks on that GPU, and
// through host memory) and reduction (the host part of the proxy). The
// figures come from MachineFacts::gpu (lanes-topo --probe, else assumed);
// docs/planner.md derives each formula.
#pragma once

#include "exec/call_facts.h"
#include "planner/host_costs.h"

namespace lanes {

// The predicted time of `facts`'s batch on `path`, which must serve it.
// `hostPart` is what the proxy runs on the host: the host algorithm's
// predicted time for the same collective on host memory.
CostTerms devicePathCost(DevicePath path, const CallFacts& facts, const MachineFacts& machine,
                         const CostTerms& hostPart);

}  // namespace lanes
