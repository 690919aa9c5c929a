// sysfs PCI attribute readers; pure functions so tests feed them files.
#include "topology/sysfs_pci.h"

#include <cstdlib>
#include <fstream>

namespace lanes::topo {

std::string readLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
  return line;
}

std::string pciDir(const std::string& root, const std::string& busId) {
  return root + "/bus/pci/devices/" + busId;
}

PciLink readPciLink(const std::string& dir) {
  PciLink l;
  l.curGen = pcieGenFromSpeed(readLine(dir + "/current_link_speed"));
  l.curWidth = std::atoi(readLine(dir + "/current_link_width").c_str());
  l.maxGen = pcieGenFromSpeed(readLine(dir + "/max_link_speed"));
  l.maxWidth = std::atoi(readLine(dir + "/max_link_width").c_str());
  l.gbps = pcieGbps(l.curGen, l.curWidth);
  return l;
}

bool acsRedirectFromConfig(const std::vector<uint8_t>& cfg, bool* known) {
  *known = false;
  // Extended capabilities start at 0x100: 16-bit id, 4-bit version, 12-bit next.
  size_t off = 0x100;
  for (int hops = 0; hops < 64 && off >= 0x100 && off + 8 <= cfg.size(); ++hops) {
    uint32_t hdr = cfg[off] | cfg[off + 1] << 8 | cfg[off + 2] << 16 |
                   static_cast<uint32_t>(cfg[off + 3]) << 24;
    if (hdr == 0 || hdr == 0xffffffffu) return false;
    if ((hdr & 0xffff) == 0x000d) {  // ACS
      uint16_t control = static_cast<uint16_t>(cfg[off + 6] | cfg[off + 7] << 8);
      *known = true;
      return (control & 0x000c) != 0;  // bit 2 P2P Request Redirect, bit 3 Completion Redirect
    }
    off = hdr >> 20;
  }
  return false;
}

IommuMode iommuModeFromGroupType(const std::string& type) {
  if (type.rfind("DMA", 0) == 0) return IommuMode::Translating;
  if (type == "identity") return IommuMode::Passthrough;
  if (type == "blocked") return IommuMode::Translating;
  return IommuMode::Unknown;
}

bool isChipsetBridge(uint16_t vendor, uint16_t device, const std::string& busId) {
  if (vendor == 0x8086 && busId.size() >= 10 && busId.compare(5, 3, "00:") == 0) {
    int dev = static_cast<int>(std::strtol(busId.substr(8, 2).c_str(), nullptr, 16));
    return dev >= 0x1b && dev <= 0x1d;
  }
  if (vendor == 0x1022) {
    // Promontory (300/400/500/600-series) ports and the X570 chipset switch.
    return (device & 0xff00) == 0x4300 || device == 0x57ad || device == 0x57a3 ||
           device == 0x57a4 || device == 0x43f4 || device == 0x43f5;
  }
  return false;
}

}  // namespace lanes::topo
