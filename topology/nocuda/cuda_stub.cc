// Without the CUDA data path: no CUDA enumeration, no probes.
#include "topology/discovery.h"
#include "topology/probe.h"

namespace lanes::topo {

void enrichFromCuda(Topology* t) {
  noteMissing(t,
              "CUDA: Lanes was built without the CUDA data path, so CUDA device numbers and "
              "cudaDeviceCanAccessPeer are unknown");
}

Status runProbes(const ProbeOptions&, Topology*) {
  return invalidUsage(
      "probes need the CUDA data path; rebuild Lanes with nvcc available "
      "(LANES_ENABLE_CUDA=ON)");
}

}  // namespace lanes::topo
