#include "core/ib_port_choice.h"

#include "core/nic_distance.h"

namespace lanes {

void chooseIbPort(const std::vector<topo::RdmaPort>& ports, const topo::Topology& topo, int cudaDev,
                  IbConfig* ib) {
  ib->device.clear();
  ib->port = 0;
  ib->gidIndex = -1;
  if (ib->disabled) {
    ib->unavailable = "LANES_IB_DISABLE is set";
    return;
  }
  if (ports.empty()) {
    ib->unavailable = "this host has no RDMA ports (/sys/class/infiniband is empty)";
    return;
  }
  const int gpu = gpuOfCudaDevice(topo, cudaDev);
  const topo::RdmaPort* best = nullptr;
  topo::PathClass bestDistance = topo::PathClass::Unknown;
  int bestGid = -1;
  for (const topo::RdmaPort& p : ports) {
    if (!p.active() || !topo::hcaSelects(ib->hca, p.device, p.port)) continue;
    const int gid = topo::chooseGid(p, ib->forcedGid);
    if (p.roce() && gid < 0) continue;
    const topo::PathClass d = gpuToNic(topo, gpu, p.device);
    if (best == nullptr || d < bestDistance) {
      best = &p;
      bestDistance = d;
      bestGid = p.roce() ? gid : -1;
    }
  }
  if (best == nullptr) {
    ib->unavailable =
        "no active RDMA port" +
        std::string(ib->hca.empty() ? "" : " that LANES_IB_HCA=" + ib->hca + " selects") +
        " has a usable GID (lanes-topo lists the ports and why)";
    return;
  }
  ib->device = best->device;
  ib->port = best->port;
  ib->gidIndex = bestGid;
  ib->unavailable.clear();
}

}  // namespace lanes
