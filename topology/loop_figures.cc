#include "topology/loop_figures.h"

#include <algorithm>

namespace lanes::topo {

void setCallFigures(const CallLoops& loops, HostProbe* h) {
  const double hop = h->hopLatencyUs;
  const double doubling = loops.doubling * 1e6;
  h->callUs = std::max(0.1 * doubling, doubling - hop);
  h->stepUs = std::clamp((loops.ring - loops.doubling) * 1e6, 0.1 * hop, hop);
  h->rootedUs = std::max(loops.broadcast * 1e6, 0.1 * hop);
  h->sumUs = loops.sum > 0 ? std::max(loops.sum * 1e6, 0.1 * hop) : 0;
}

}  // namespace lanes::topo
