// Every knob of one communicator, read from the environment once, when the
// communicator is made (docs/env.md lists them). The layers below take these
// values; none of them reads the environment for a knob. What is read per
// process instead (logging, the launch and bootstrap variables, the topology
// files, LANES_STREAM_MEMOPS and LANES_SPIN_ITERATIONS) is listed in
// docs/env.md too.
#pragma once

#include <cstddef>
#include <string>

#include "exec/call_facts.h"
#include "exec/stage_stream_policy.h"
#include "transport/hoststage/arena.h"
#include "transport/transport_config.h"

namespace lanes {

struct CommConfig {
  SelectionConfig selection;   // path choice and the device paths' limits
  TransportConfig transport;   // shm, sockets, P2P
  StageArenaConfig stage;      // LANES_STAGE_CHUNK_BYTES, _SLOTS, _PAIR_CHUNK_BYTES
  int lanes = 2;               // LANES_NLANES: lane 0 carries send/recv, the others collectives
  bool checkMismatch = false;  // LANES_CHECK_MISMATCH
  size_t proxyPrepinBytes = size_t{16} << 20;                      // LANES_PROXY_PREPIN_BYTES
  SharedStreamsMode stageSharedStreams = SharedStreamsMode::Auto;  // LANES_STAGE_SHARED_STREAMS
  int hostSumThreads = 0;  // LANES_HOST_SUM_THREADS: reducer threads per rank (0: by the cores)
  size_t flightEntries =
      1024;  // LANES_FLIGHT_RECORDER: operations the flight recorder keeps (0: off)

  // Reads every variable above; a bad value warns once (naming the variable
  // and what is used instead) and leaves the default.
  static CommConfig fromEnv();
};

// A LANES_ALGO list ("ring", "^tree,rd"), for settings made in code.
Status parseAlgoList(const std::string& text, NameList* out);

// Reducer threads per rank of host summation: `configured`
// (LANES_HOST_SUM_THREADS) where set, else the host's `cores` shared by its
// `ranks` ranks, 1 to 8 each (the staged path's setup agrees on the fewest).
int hostSumThreadsFor(int configured, int ranks, int cores);

}  // namespace lanes
