#include "core/nic_distance.h"

namespace lanes {

int gpuOfCudaDevice(const topo::Topology& topo, int cudaDev) {
  if (cudaDev < 0) return -1;
  for (size_t g = 0; g < topo.gpus.size(); ++g)
    if (topo.gpus[g].cudaIndex == cudaDev) return static_cast<int>(g);
  return -1;
}

topo::PathClass gpuToNic(const topo::Topology& topo, int gpu, const std::string& name) {
  if (gpu < 0 || name.empty()) return topo::PathClass::Unknown;
  for (size_t n = 0; n < topo.nics.size(); ++n)
    if (topo.nics[n].rdma == name || topo.nics[n].netdev == name || topo.nics[n].name == name)
      return topo::gpuNicPath(topo, gpu, static_cast<int>(n));
  return topo::PathClass::Unknown;
}

}  // namespace lanes
