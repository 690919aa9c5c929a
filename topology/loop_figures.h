// The host path's per-call figures, from loops of 8-byte calls between two
// thread ranks (lanes-topo --probe): what a call costs beyond its hops, what
// a later step inside a call costs, and what a rooted call and a
// host-summation call cost in a loop.
#pragma once

#include "topology/model.h"

namespace lanes::topo {

// Seconds per call of each loop, the fastest of its turns.
struct CallLoops {
  double doubling = 0;   // all-reduce by recursive doubling: the call and one hop
  double ring = 0;       // all-reduce by the ring: one step more
  double broadcast = 0;  // a direct broadcast, calls back to back
  double sum = 0;        // an all-reduce by host summation (0: the host has no arena)
};

// Sets h's callUs, stepUs, rootedUs and sumUs from `loops` and h's hop (the ping-pong's,
// already measured). Noise can make a difference negative or past the hop, so:
//  - the call is doubling less the hop, at least a tenth of doubling (a
//    ping-pong hop slower than the whole all-reduce would leave no call);
//  - the step is ring less doubling, within [a tenth of the hop, the hop];
//  - a rooted call is the broadcast loop's time, at least a tenth of the hop;
//  - a host-summation call is its loop's time, at least a tenth of the hop
//    (none where the loop did not run).
void setCallFigures(const CallLoops& loops, HostProbe* h);

}  // namespace lanes::topo
