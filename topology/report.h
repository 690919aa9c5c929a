// Text views of the model: the GPU/NIC matrix in `nvidia-smi topo -m` form,
// and lanes-topo's full report.
#pragma once

#include <string>

#include "topology/model.h"

namespace lanes::topo {

// Tab-separated like nvidia-smi (so import_nvidia_smi reads it back), with
// its legend and the NIC legend.
std::string formatMatrix(const Topology& topo);
// Machine summary, matrix, per-GPU details, probe figures, missing sources
// and warnings with fixes.
std::string formatReport(const Topology& topo);

}  // namespace lanes::topo
