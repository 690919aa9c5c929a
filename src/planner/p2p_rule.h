// Whether the GPUs of a communicator's ranks on this host may reach each
// other peer to peer, by the topology and the probes: never on a pair the
// probe found broken, and not across the CPU link (SYS), where P2P usually
// runs slower than staging through host memory, unless the probe measured
// that pair faster. The P2P transport's own reachability check and probe
// come after (transport/p2p/ipc_slots.h); LANES_P2P_DISABLE=0 overrules this.
#pragma once

#include <string>
#include <vector>

#include "topology/model.h"

namespace lanes {

// `busIds`: the GPUs of the ranks on this host, one per rank (repeats are
// ranks sharing a GPU). "" where the topology allows P2P between every pair,
// else the reason it does not, naming the pair.
std::string p2pRefusalByTopology(const topo::Topology& t, const std::vector<std::string>& busIds);

}  // namespace lanes
