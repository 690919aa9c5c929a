// Topology <-> JSON (LANES_TOPO_DUMP_FILE writes it, LANES_TOPO_FILE and
// `lanes-topo --load` read it back in place of discovery).
#pragma once

#include <string>

#include "base/status.h"
#include "topology/json.h"
#include "topology/model.h"

namespace lanes::topo {

Json toJson(const Topology& topo);
Status fromJson(const Json& json, Topology* out);
Json probesToJson(const Probes& probes);
Probes probesFromJson(const Json& json);

Status readTextFile(const std::string& path, std::string* out);
Status writeTextFile(const std::string& path, const std::string& text);
Status saveJsonFile(const std::string& path, const Topology& topo);
Status loadJsonFile(const std::string& path, Topology* out);

}  // namespace lanes::topo
