// Live discovery and XML import through hwloc (hwloc_topology_set_xml reads
// what `lstopo --of xml` wrote on another machine).
#include "topology/discovery.h"

#ifdef LANES_HAVE_HWLOC
#include <dlfcn.h>
#include <hwloc.h>
#include <link.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/sanitizers.h"
#include "topology/hwloc_build.h"
#include "topology/hwloc_xml_check.h"
#endif

namespace lanes::topo {

#ifdef LANES_HAVE_HWLOC

namespace {

struct HwlocDeleter {
  void operator()(hwloc_topology* h) const { hwloc_topology_destroy(h); }
};
using HwlocPtr = std::unique_ptr<hwloc_topology, HwlocDeleter>;

// hwloc's pci plugin leaks about 1 KB (in libpciaccess) per live load and is
// unloaded with the last topology, so at exit LeakSanitizer's fast unwinder
// cannot name the leak's frames. Kept loaded, they are named, and
// tests/sanitizers/lsan.supp suppresses them without the slow unwinder, which
// would take a full stack at every malloc of every sanitized test.
void keepHwlocPluginsLoaded() {
  if constexpr (!kUnderAddressSanitizer) return;
  // Named first, opened after: dlopen inside dl_iterate_phdr's callback takes
  // the loader's locks in the opposite order to another thread's dlopen.
  std::vector<std::string> plugins;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        if (info->dlpi_name != nullptr && std::strstr(info->dlpi_name, "/hwloc/hwloc_") != nullptr)
          static_cast<std::vector<std::string>*>(out)->emplace_back(info->dlpi_name);
        return 0;
      },
      &plugins);
  for (const std::string& name : plugins)
    dlopen(name.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

// hwloc says only EINVAL for a file it refuses; its reasons go to stderr.
std::string xmlFailure(const std::string& path, int err) {
  return "hwloc could not parse " + path + " (hwloc " HWLOC_VERSION " here): " + errnoText(err) +
         "; run again with HWLOC_XML_VERBOSE=1 to see hwloc's reason, and export the file with "
         "`lstopo --of xml FILE.xml` (hwloc 2.x) on that machine, or use `lanes-topo --json` "
         "there and --load here";
}

Status load(const std::string* xmlPath, Topology* out) {
  if (xmlPath != nullptr) LANES_RETURN_IF_ERROR(checkHwlocXmlFile(*xmlPath, HWLOC_VERSION));
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return systemError("hwloc_topology_init failed");
  HwlocPtr h(raw);
  // Live: only bridges leading to GPUs/NICs matter; XML: keep what the file says.
  hwloc_topology_set_io_types_filter(
      raw, xmlPath ? HWLOC_TYPE_FILTER_KEEP_ALL : HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  // A file exported inside a cpuset/cgroup marks the other NUMA nodes
  // disallowed; without this flag hwloc drops them, and the GPUs there with them.
  if (xmlPath != nullptr) hwloc_topology_set_flags(raw, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  // Displays and OpenCL devices say nothing Lanes plans by, and their
  // components' discovery (the OpenCL loader's platforms, an X display) left
  // state that crashed LeakSanitizer's check at exit in ranks of ASan builds.
  if (xmlPath == nullptr)
    for (const char* unused : {"gl", "opencl"})
      hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, unused);
  if (xmlPath != nullptr && hwloc_topology_set_xml(raw, xmlPath->c_str()) != 0)
    return invalidArgument(xmlFailure(*xmlPath, errno));
  if (hwloc_topology_load(raw) != 0)
    return xmlPath ? invalidArgument(xmlFailure(*xmlPath, errno))
                   : systemError("hwloc could not load the topology: " + errnoText(errno));
  keepHwlocPluginsLoaded();
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
  return invalidUsage(
      "this build of Lanes has no hwloc, so the CPU/PCIe tree comes from sysfs (Debian/Ubuntu: "
      "apt install libhwloc-dev pkg-config, then re-run cmake and rebuild Lanes)");
}
Status importHwlocXml(const std::string& path, Topology*) {
  return invalidUsage("cannot import " + path +
                      ": this build of Lanes has no hwloc (Debian/Ubuntu: apt install "
                      "libhwloc-dev pkg-config, then re-run cmake and rebuild Lanes); meanwhile "
                      "--import-nvidia-smi or --load (lanes-topo --json on that machine) work");
}

#endif

}  // namespace lanes::topo
