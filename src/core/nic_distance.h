// How far a rank's GPU is from a NIC, for picking the NIC a rank's traffic
// to other hosts takes (the verbs port, the TCP interface).
#pragma once

#include <string>

#include "topology/model.h"
#include "topology/path_class.h"

namespace lanes {

// The index into topo.gpus of CUDA device `cudaDev`; -1 where the model
// does not hold it (or cudaDev < 0: no GPU).
int gpuOfCudaDevice(const topo::Topology& topo, int cudaDev);

// The PCI path from GPU `gpu` (an index into topo.gpus) to the NIC called
// `name` (its RDMA device or its netdev); Unknown where either is not in the
// tree.
topo::PathClass gpuToNic(const topo::Topology& topo, int gpu, const std::string& name);

}  // namespace lanes
