// Loopback mesh: Connections between ranks that are threads of one process,
// over ByteRings in private memory. Used by tests of algorithms and of the
// executor, and by nothing on the product path (threads of one process use
// the shm transport like processes do).
#pragma once

#include <memory>
#include <vector>

#include "transport/transport.h"

namespace lanes {

class LoopbackMesh {
 public:
  LoopbackMesh(int nranks, int lanes, size_t ringBytes);
  ~LoopbackMesh();
  // Connection from `rank` to `peer` (nullptr when rank == peer).
  Connection* connection(int rank, int peer);
  // All of rank's connections indexed by peer, as the executor wants them.
  std::vector<Connection*> table(int rank);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lanes
