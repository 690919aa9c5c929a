// Fuzzes the `nvidia-smi topo -m` text import (lanes-topo --import-nvidia-smi):
// the matrix is pasted by users and may be cut, reflowed or from a newer driver.
#include <cstdint>
#include <string>

#include "topology/import_nvidia_smi.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lanes::topo::Topology topo;
  (void)lanes::topo::parseNvidiaSmiTopo(std::string(reinterpret_cast<const char*>(data), size),
                                        &topo);
  return 0;
}
