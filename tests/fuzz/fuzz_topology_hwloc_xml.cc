// Fuzzes the hwloc XML import (an `lstopo --of xml` file given to Lanes):
// hwloc parses the XML, then buildFromHwloc turns whatever hwloc accepted into
// the model. Crashes inside libhwloc itself are hwloc's; report them upstream.
#include <hwloc.h>

#include <cstdint>
#include <string>

#include "topology/hwloc_build.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hwloc_topology_t h;
  if (hwloc_topology_init(&h) != 0) return 0;
  hwloc_topology_set_io_types_filter(h, HWLOC_TYPE_FILTER_KEEP_ALL);
  // hwloc wants the buffer NUL-terminated, the size counting the NUL.
  const std::string xml(reinterpret_cast<const char*>(data), size);
  if (hwloc_topology_set_xmlbuffer(h, xml.c_str(), static_cast<int>(xml.size() + 1)) == 0 &&
      hwloc_topology_load(h) == 0) {
    lanes::topo::Topology topo;
    lanes::topo::buildFromHwloc(h, &topo);
  }
  hwloc_topology_destroy(h);
  return 0;
}
