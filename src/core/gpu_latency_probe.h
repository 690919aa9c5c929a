// The GPU latencies a device path's cost model reads (lanes-topo --probe, and
// the probe at first use: core/first_use_probe.h): a
// stream counter in mapped host memory from one stream to another of the same
// GPU, and a tiny kernel's launch. Measured through Lanes' own counter ops and
// kernels (exec/, kernels/), which topology/ may not reach, hence here and not
// beside the copy probes in topology/cuda/probe.cc.
#pragma once

#include "base/status.h"
#include "topology/model.h"

namespace lanes {

// Fills flagUs and launchUs of every GPU in topo->probes.gpus (runProbes
// first); tens of milliseconds per GPU. A build without CUDA leaves them 0.
Status measureGpuLatencies(topo::Topology* topo);

}  // namespace lanes
