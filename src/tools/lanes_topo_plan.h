// lanes-topo --plan: where each collective would run on a machine (this one
// or an imported model), from the same selection function a call uses
// (planner/registry.h), with the host algorithms' predicted times.
#pragma once

#include <optional>
#include <string>

#include "base/collective.h"
#include "topology/model.h"

namespace lanes {

// The GPUs --plan spreads ranks over: those CUDA sees in this process (a live
// model under CUDA_VISIBLE_DEVICES lists the hidden ones too), else all of an
// imported model's.
int planGpus(const topo::Topology& t);

// How the planned ranks run: as threads of one process or as processes, and
// whether processes sharing a GPU run under MPS (unset: ask CUDA about this
// machine's first GPU; an imported model's answer is no).
struct PlanLaunch {
  bool threads = false;
  std::optional<bool> mps;
  // Hosts like the model's machine the ranks are spread over, in blocks
  // (rank r on host r / ceil(nranks / hosts)); between hosts they talk TCP.
  int hosts = 1;
};

// For `nranks` ranks as processes of one host (or, with `threads`, threads of
// one process), rank r on GPU r % GPUs, every
// device path set up as by default (LANES_PROTO, LANES_ALGO and the size
// variables as the environment sets them), the cost model's figures from the
// model's probes (else assumed): a table of device-buffer plans (when the
// model has GPUs) and one of host-buffer plans. With `coll`, that collective
// alone, size by size, with the host choice explained.
std::string formatPlanTable(const topo::Topology& t, int nranks, PlanLaunch launch = {},
                            std::optional<CollType> coll = std::nullopt);

// The plan as JSON, for calibration (bench/planner/calibrate.py): per
// collective (or `coll` alone) and size, every host candidate ("host") and,
// where the model has GPUs, every eligible device path ("device") with its
// predicted time and terms, and the chosen one. Sizes are the perf tools'
// (nccl-tests': all-gather and all-to-all count the whole receive buffer).
std::string formatPlanJson(const topo::Topology& t, int nranks, PlanLaunch launch = {},
                           std::optional<CollType> coll = std::nullopt);

}  // namespace lanes
