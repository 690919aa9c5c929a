// What is wrong with a box for collective traffic, each with its fix.
#pragma once

#include <string>
#include <vector>

#include "topology/model.h"

namespace lanes::topo {

enum class WarningKind {
  LinkBelowMax,  // a GPU's link trained below its maximum generation or width
  ChipsetLanes,  // a GPU behind chipset lanes
  AcsRedirect,   // ACS redirect on a bridge between GPUs
  IommuTranslating,
  SmallBar1,       // BAR1 below 1 GiB: Resizable BAR off
  P2pBroken,       // P2P advertised but failed the probe
  NicNumaMismatch  // a GPU with no NIC on its NUMA node
};
const char* warningName(WarningKind kind);

struct Warning {
  WarningKind kind;
  std::string subject;  // "GPU1 (0000:41:00.0)", "bridge 0000:40:01.1"
  std::string text;     // what is wrong
  std::string fix;      // what to do
};

std::vector<Warning> findWarnings(const Topology& topo);

}  // namespace lanes::topo
