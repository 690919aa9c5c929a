// Which RDMA port a rank's verbs transport uses: among the active ports that
// LANES_IB_HCA selects and that have a usable GID, the one nearest the
// rank's GPU in the PCI tree (PIX before PXB before PHB ... before SYS), the
// first listed on a tie or without a GPU. `lanes-topo` reports the same
// choice for the live machine.
#pragma once

#include <string>
#include <vector>

#include "topology/model.h"
#include "topology/rdma_ports.h"
#include "transport/transport_config.h"

namespace lanes {

// Fills ib->device, port and gidIndex, or ib->unavailable with why none.
// `cudaDev` is the rank's CUDA device (-1 none), matched to topo's GPUs.
void chooseIbPort(const std::vector<topo::RdmaPort>& ports, const topo::Topology& topo, int cudaDev,
                  IbConfig* ib);

}  // namespace lanes
