// hwloc_topology_set_xml() fails with EINVAL for every kind of bad file and
// explains itself only on stderr under HWLOC_XML_VERBOSE=1; the common cases
// are recognised here and named.
#include "topology/hwloc_xml_check.h"

#include <cctype>
#include <cstdlib>

#include "topology/json_io.h"

namespace lanes::topo {

std::string hwlocXmlFormat(const std::string& xml, bool* hasTopology) {
  *hasTopology = false;
  size_t tag = xml.find("<topology");
  while (tag != std::string::npos && tag + 9 < xml.size() && xml[tag + 9] != '>' &&
         !std::isspace(static_cast<unsigned char>(xml[tag + 9])))
    tag = xml.find("<topology", tag + 1);  // skip <topologyfoo>
  if (tag == std::string::npos) return "";
  *hasTopology = true;
  size_t end = xml.find('>', tag);
  std::string element = xml.substr(tag, end == std::string::npos ? std::string::npos : end - tag);
  for (const char* q : {"version=\"", "version='"}) {
    size_t at = element.find(q);
    if (at == std::string::npos) continue;
    at += 9;
    size_t close = element.find(q[8], at);
    return element.substr(at, close == std::string::npos ? std::string::npos : close - at);
  }
  return "";
}

Status checkHwlocXmlFile(const std::string& path, const std::string& hwlocVersion) {
  std::string xml;
  LANES_RETURN_IF_ERROR(readTextFile(path, &xml));
  const std::string howTo =
      "; on that machine run `lstopo --of xml FILE.xml` (hwloc 2.x) or `lanes-topo --json > "
      "FILE.json` and give that to --load";
  bool hasTopology = false;
  std::string format = hwlocXmlFormat(xml, &hasTopology);
  if (!hasTopology)
    return invalidArgument(path + " is not hwloc XML (it has no <topology> element)" + howTo);
  if (xml.find("</topology>") == std::string::npos)
    return invalidArgument(path +
                           " ends before </topology>: the file is cut off; copy it again "
                           "whole" +
                           howTo);
  if (!format.empty() && std::atoi(format.c_str()) > std::atoi(hwlocVersion.c_str()))
    return invalidArgument("hwloc could not parse " + path + ": the file is hwloc XML format " +
                           format + ", which comes from a newer hwloc than this build's (hwloc " +
                           hwlocVersion + " here, reading formats up to " +
                           std::to_string(std::atoi(hwlocVersion.c_str())) + ".x)" + howTo);
  return Status::ok();
}

}  // namespace lanes::topo
