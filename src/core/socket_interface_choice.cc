#include "core/socket_interface_choice.h"

#include "core/nic_distance.h"

namespace lanes {

InterfaceChoice nearestInterface(const std::vector<InterfaceAddress>& interfaces, int family,
                                 const topo::Topology& topo, int cudaDev) {
  InterfaceChoice best;
  const int gpu = gpuOfCudaDevice(topo, cudaDev);
  if (gpu < 0) return best;
  for (const InterfaceAddress& i : interfaces) {
    if (i.address.family() != family) continue;
    const topo::PathClass d = gpuToNic(topo, gpu, i.name);
    if (d != topo::PathClass::Unknown && d < best.distance) best = {i.name, d};
  }
  return best;
}

}  // namespace lanes
