// CUDA's view: which GPU is which CUDA index, and where peer access is
// advertised (cudaDeviceCanAccessPeer).
#include <cuda_runtime.h>

#include "base/log.h"
#include "topology/discovery.h"

namespace lanes::topo {

void enrichFromCuda(Topology* t) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    noteMissing(t, std::string("CUDA: no device visible (") + cudaGetErrorString(err) + ")");
    return;
  }
  t->sources.push_back("cuda");
  std::vector<int> gpuOf(count, -1);
  for (int d = 0; d < count; ++d) {
    char bus[32] = {};
    if (cudaDeviceGetPCIBusId(bus, sizeof(bus), d) != cudaSuccess) continue;
    std::string id = normalizeBusId(bus);
    int g = -1;
    for (size_t i = 0; i < t->gpus.size(); ++i)
      if (t->gpus[i].busId == id) g = static_cast<int>(i);
    if (g < 0) {  // not in the tree (no hwloc/sysfs): hang it under the machine
      Gpu gpu;
      gpu.node = t->addNode(NodeKind::Gpu, 0);
      t->nodes[gpu.node].busId = id;
      gpu.busId = id;
      t->gpus.push_back(gpu);
      g = static_cast<int>(t->gpus.size()) - 1;
    }
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) == cudaSuccess) {
      t->gpus[g].name = prop.name;
      t->gpus[g].memBytes = prop.totalGlobalMem;
    }
    t->gpus[g].cudaIndex = d;
    gpuOf[d] = g;
  }
  t->resizeMatrices();
  for (int a = 0; a < count; ++a) {
    for (int b = 0; b < count; ++b) {
      int can = 0;
      if (a == b || gpuOf[a] < 0 || gpuOf[b] < 0) continue;
      if (cudaDeviceCanAccessPeer(&can, a, b) == cudaSuccess) t->p2p[gpuOf[a]][gpuOf[b]] = can;
    }
  }
  cudaGetLastError();
  LANES_INFO(Topo, -1, "CUDA: %d devices", count);
}

}  // namespace lanes::topo
