// The cost model's inputs measured at a machine's first use: before the first
// communicator with a GPU rank plans, a process whose probe cache holds no
// figures for this machine measures the host path and its GPU (as
// `lanes-topo --probe` does, with shorter GPU copies) and caches them, so the
// plans follow the measured box from the first run on (docs/planner.md).
#pragma once

namespace lanes {

// Once per process, for a rank on CUDA device `cudaDev` of a communicator
// whose operations may wait `timeoutSeconds`. Skipped where the process
// already has figures (cached or from LANES_TOPO_FILE), where LANES_TOPO_PROBE
// is 0, where the cache is off (LANES_TOPO_CACHE=none: it would measure in
// every process), where the topology does not list the GPU, and where the
// timeout is under a minute (peers of other processes wait while it measures). A failure warns; the
// model then keeps its assumed figures.
void probeMachineAtFirstUse(int cudaDev, double timeoutSeconds);

}  // namespace lanes
