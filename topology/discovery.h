// Discovery of the machine this process runs on, one source per file:
// hwloc (tree, CPUs, NUMA, PCI), sysfs (link training, NUMA, ACS, IOMMU),
// NVML (driver view: BAR1, P2P, NVLink) and CUDA (device numbering). Every
// source is optional; what is missing is logged at INFO and recorded in
// Topology::missing, which lanes-topo shows.
#pragma once

#include <string>

#include "base/status.h"
#include "topology/model.h"

namespace lanes::topo {

struct DiscoverOptions {
  bool hwloc = true, sysfs = true, nvml = true, cuda = true;
  std::string sysfsRoot = "/sys";  // tests point this at a fake tree
};

// The live machine, every enabled source merged.
Status discover(const DiscoverOptions& options, Topology* out);

// What a communicator uses: LANES_TOPO_FILE when set (replaces discovery),
// else discover(); writes LANES_TOPO_DUMP_FILE when set; attaches cached
// probe results (LANES_TOPO_CACHE) whose key matches. Never fails: a source
// that fails is noted in `missing`.
Topology systemTopology();

// --- per source (discovery_*.cc, nvml.cc, cuda/) ---
bool hwlocAvailable();  // built with hwloc
Status discoverHwloc(Topology* out);
Status importHwlocXml(const std::string& path, Topology* out);
// Builds CPUs/NUMA and the PCI chains of GPUs and NICs from sysfs alone.
Status discoverSysfsTree(const std::string& root, Topology* out);
// Adds link training, NUMA, CPU lists, ACS and IOMMU mode to PCI nodes.
void enrichFromSysfs(const std::string& root, Topology* topo);
void enrichFromNvml(Topology* topo);
void enrichFromCuda(Topology* topo);

// Records a missing source: INFO log line plus Topology::missing.
void noteMissing(Topology* topo, const std::string& sentence);
// GPUs and NICs keep numa in step with the tree once it is complete.
void finishTopology(Topology* topo);

}  // namespace lanes::topo
