// Reads the text of `nvidia-smi topo -m` into a model: NUMA nodes from the
// affinity columns, and within them a tree that reproduces the matrix's path
// classes (switches, host bridges are synthesised; link training is unknown).
#pragma once

#include <string>

#include "base/status.h"
#include "topology/model.h"

namespace lanes::topo {

Status parseNvidiaSmiTopo(const std::string& text, Topology* out);
Status importNvidiaSmiFile(const std::string& path, Topology* out);

}  // namespace lanes::topo
