// sysfs enrichment: what hwloc does not say (link training current vs max,
// ACS, IOMMU mode) or what a model without hwloc still needs (NUMA, CPUs).
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "topology/discovery.h"
#include "topology/sysfs_pci.h"

namespace lanes::topo {

namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> readConfig(const std::string& dir) {
  std::ifstream in(dir + "/config", std::ios::binary);
  if (!in) return {};
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

uint16_t readHex16(const std::string& path) {
  return static_cast<uint16_t>(std::strtol(readLine(path).c_str(), nullptr, 16));
}

}  // namespace

void enrichFromSysfs(const std::string& root, Topology* t) {
  std::error_code ec;
  if (!fs::exists(root + "/bus/pci/devices", ec)) {
    noteMissing(t, "sysfs: " + root +
                       "/bus/pci/devices is absent, so PCIe link training, ACS "
                       "and IOMMU mode are unknown");
    return;
  }
  t->sources.push_back("sysfs");
  bool acsUnreadable = false;
  for (Node& n : t->nodes) {
    if (n.busId.size() != 12) continue;  // full dddd:bb:dd.f only
    std::string dir = pciDir(root, n.busId);
    if (!fs::exists(dir, ec)) continue;
    PciLink l = readPciLink(dir);
    if (l.known()) n.link = l;
    if (n.vendor == 0) n.vendor = readHex16(dir + "/vendor");
    if (n.device == 0) n.device = readHex16(dir + "/device");
    if (n.kind == NodeKind::Bridge) {
      n.chipset = n.chipset || isChipsetBridge(n.vendor, n.device, n.busId);
      bool known = false;
      bool redirect = acsRedirectFromConfig(readConfig(dir), &known);
      n.acsRedirect = n.acsRedirect || redirect;
      acsUnreadable = acsUnreadable || !known;
    }
  }
  for (Gpu& g : t->gpus) {
    std::string dir = pciDir(root, g.busId);
    std::string numa = readLine(dir + "/numa_node");
    if (!numa.empty() && std::atoi(numa.c_str()) >= 0 && g.numa < 0)
      g.numa = std::atoi(numa.c_str());
    std::string cpus = readLine(dir + "/local_cpulist");
    if (!cpus.empty()) g.cpus = cpus;
    std::string type = readLine(dir + "/iommu_group/type");
    if (!type.empty()) t->iommu = iommuModeFromGroupType(type);
  }
  for (Nic& n : t->nics) {
    std::string numa = readLine(pciDir(root, n.busId) + "/numa_node");
    if (!numa.empty() && n.numa < 0 && std::atoi(numa.c_str()) >= 0)
      n.numa = std::atoi(numa.c_str());
    if (!n.netdev.empty()) {
      long mbps = std::atol(readLine(root + "/class/net/" + n.netdev + "/speed").c_str());
      if (mbps > 0) n.gbps = mbps / 8000.0;
    }
  }
  if (t->iommu == IommuMode::Unknown) {
    bool groups = fs::exists(root + "/kernel/iommu_groups", ec) &&
                  !fs::is_empty(root + "/kernel/iommu_groups", ec);
    if (!groups) t->iommu = IommuMode::Off;
  }
  if (acsUnreadable)
    noteMissing(t,
                "sysfs: the ACS capability of some bridges is unreadable (the PCI extended "
                "config space needs root); ACS warnings may be missing");
}

}  // namespace lanes::topo
