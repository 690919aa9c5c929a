// Looks at an hwloc XML file before hwloc does, so a file hwloc would refuse
// with a bare errno gets a reason: not XML at all, not hwloc's, or written
// by a newer hwloc than the one linked here. Needs no hwloc.
#pragma once

#include <string>

#include "base/status.h"

namespace lanes::topo {

// `hwlocVersion` is this build's ("2.9.0"); formats up to its major version
// are accepted (hwloc 2.x reads the 1.x and 2.x formats).
Status checkHwlocXmlFile(const std::string& path, const std::string& hwlocVersion);

// The `version` attribute of the root <topology> element, "" when absent
// (hwloc 1.x wrote none) or when `xml` has no such element.
std::string hwlocXmlFormat(const std::string& xml, bool* hasTopology);

}  // namespace lanes::topo
