#include "planner/machine_facts.h"

namespace lanes {

MachineFacts machineFactsOf(const topo::Topology& t) {
  MachineFacts m;
  if (t.cores > 0) m.cores = t.cores;
  const topo::HostProbe& h = t.probes.host;
  if (!h.measured()) return m;
  static_assert(MachineFacts::kCurvePoints == topo::HostProbe::kCurvePoints);
  m.callUs = h.callUs;
  m.hopLatencyUs = h.hopLatencyUs;
  for (int i = 0; i < MachineFacts::kCurvePoints; ++i) {
    m.hopGBs[i] = h.hopGBs[static_cast<size_t>(i)];
    m.reduceGBs[i] = h.reduceGBs[static_cast<size_t>(i)];
  }
  m.memGBs = h.memGBs;
  m.exchangeGBs = h.exchangeGBs;
  m.measured = true;
  return m;
}

}  // namespace lanes
