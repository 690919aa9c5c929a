// The topology a process uses: a file named by LANES_TOPO_FILE, else the
// live machine; dumped to LANES_TOPO_DUMP_FILE; cached probes attached.
#include "base/env.h"
#include "base/log.h"
#include "topology/discovery.h"
#include "topology/json_io.h"
#include "topology/probe.h"

namespace lanes::topo {

Topology systemTopology() {
  Topology t;
  bool loaded = false;
  if (auto file = envString("LANES_TOPO_FILE")) {
    Status s = loadJsonFile(*file, &t);
    if (s) {
      loaded = true;
      LANES_INFO(Topo, -1, "topology: loaded from LANES_TOPO_FILE=%s", file->c_str());
    } else {
      LANES_WARN(Topo, -1, "LANES_TOPO_FILE: %s; discovering the machine instead",
                 s.message().c_str());
    }
  }
  if (!loaded) {
    Status s = discover(DiscoverOptions{}, &t);
    if (!s) {
      LANES_WARN(Topo, -1, "topology discovery failed: %s", s.message().c_str());
      t = Topology{};
      finishTopology(&t);
      t.missing.push_back("discovery failed: " + s.message());
    }
  }
  if (t.probes.empty()) loadCachedProbes(probeCachePath(), &t);
  if (auto dump = envString("LANES_TOPO_DUMP_FILE")) {
    Status s = saveJsonFile(*dump, t);
    if (!s) LANES_WARN(Topo, -1, "LANES_TOPO_DUMP_FILE: %s", s.message().c_str());
  }
  return t;
}

}  // namespace lanes::topo
