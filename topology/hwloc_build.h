// Builds the model from a loaded hwloc topology (live or XML). Only included
// where hwloc is built in.
#pragma once

#include <hwloc.h>

#include "topology/model.h"

namespace lanes::topo {

// Fills `out` from `h`; PCI subtrees without a GPU or NIC are left out.
void buildFromHwloc(hwloc_topology_t h, Topology* out);

}  // namespace lanes::topo
