// Which interface the socket transport listens on for a rank where
// LANES_SOCKET_IFNAME is unset: the one nearest the rank's GPU in the PCI
// tree (PIX before PXB before PHB ... before SYS), as the verbs transport
// picks its port. `lanes-topo` reports the same choice for the live machine.
#pragma once

#include <string>
#include <vector>

#include "base/socket.h"
#include "topology/model.h"
#include "topology/path_class.h"

namespace lanes {

struct InterfaceChoice {
  std::string name;  // empty: no candidate is in the PCI tree, or no GPU
  topo::PathClass distance = topo::PathClass::Unknown;
};

// Of `interfaces` (findInterfaces' candidates, in its order) with an address
// of `family`, the one whose NIC is nearest GPU `cudaDev`, the first on a
// tie. Interfaces that are no PCI device (bridges, veths, bonds) and a rank
// without a GPU the model holds leave the choice to the transport's default.
InterfaceChoice nearestInterface(const std::vector<InterfaceAddress>& interfaces, int family,
                                 const topo::Topology& topo, int cudaDev);

}  // namespace lanes
