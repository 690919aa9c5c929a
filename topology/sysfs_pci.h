// Reading one PCI function's attributes from sysfs (/sys/bus/pci/devices/X).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topology/model.h"

namespace lanes::topo {

// First line of a file without the newline; empty when unreadable.
std::string readLine(const std::string& path);
// "0-3,8-11" style list of a sysfs cpulist file, or "".
std::string pciDir(const std::string& root, const std::string& busId);
PciLink readPciLink(const std::string& dir);
// ACS control of a bridge from its config space (needs root for the
// extended space); true when P2P request or completion redirect is on.
// Returns false with *known = false when the capability cannot be read.
bool acsRedirectFromConfig(const std::vector<uint8_t>& config, bool* known);
// "DMA", "DMA-FQ" -> Translating, "identity" -> Passthrough.
IommuMode iommuModeFromGroupType(const std::string& type);
// Intel PCH root ports (bus 0, devices 1b-1d) and AMD Promontory chipset
// switches are chipset lanes: shared with USB/SATA/NVMe over a x4 uplink.
bool isChipsetBridge(uint16_t vendor, uint16_t device, const std::string& busId);

}  // namespace lanes::topo
