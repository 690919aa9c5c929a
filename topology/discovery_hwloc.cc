// Live discovery and XML import through hwloc (hwloc_topology_set_xml reads
// what `lstopo --of xml` wrote on another machine).
#include "topology/discovery.h"

#ifdef LANES_HAVE_HWLOC
#include <hwloc.h>

#include <memory>

#include "topology/hwloc_build.h"
#endif

namespace lanes::topo {

#ifdef LANES_HAVE_HWLOC

namespace {

struct HwlocDeleter {
  void operator()(hwloc_topology* h) const { hwloc_topology_destroy(h); }
};
using HwlocPtr = std::unique_ptr<hwloc_topology, HwlocDeleter>;

Status load(const std::string* xmlPath, Topology* out) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return systemError("hwloc_topology_init failed");
  HwlocPtr h(raw);
  // Live: only bridges leading to GPUs/NICs matter; XML: keep what the file says.
  hwloc_topology_set_io_types_filter(
      raw, xmlPath ? HWLOC_TYPE_FILTER_KEEP_ALL : HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (xmlPath != nullptr && hwloc_topology_set_xml(raw, xmlPath->c_str()) != 0)
    return invalidArgument("hwloc cannot read " + *xmlPath + ": " + errnoText(errno) +
                           " (is it the output of `lstopo --of xml`?)");
  if (hwloc_topology_load(raw) != 0)
    return systemError(std::string("hwloc could not load the topology") +
                       (xmlPath ? " from " + *xmlPath : "") + ": " + errnoText(errno));
  buildFromHwloc(raw, out);
  out->sources.push_back(xmlPath ? "hwloc-xml" : "hwloc");
  return Status::ok();
}

}  // namespace

bool hwlocAvailable() { return true; }
Status discoverHwloc(Topology* out) { return load(nullptr, out); }
Status importHwlocXml(const std::string& path, Topology* out) {
  LANES_RETURN_IF_ERROR(load(&path, out));
  finishTopology(out);
  return Status::ok();
}

#else

bool hwlocAvailable() { return false; }
Status discoverHwloc(Topology*) {
  return invalidUsage("Lanes was built without hwloc (install libhwloc-dev and rebuild)");
}
Status importHwlocXml(const std::string& path, Topology*) {
  return invalidUsage("cannot import " + path +
                      ": Lanes was built without hwloc (install libhwloc-dev and rebuild)");
}

#endif

}  // namespace lanes::topo
