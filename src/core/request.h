// One API call waiting to run: a collective or one side of a send/recv.
// Calls outside a group run at once as a group of one.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "core/comm.h"
#include "core/datatype.h"

namespace lanes {

struct Request {
  lanesComm* comm = nullptr;
  bool isP2p = false;
  // Collective.
  CollArgs args;
  RedOp op;  // the op as the user asked (Avg, PreMulSum included)
  // Send/recv.
  bool isSend = false;
  int peer = -1;
  const void* sendbuf = nullptr;
  void* recvbuf = nullptr;
  size_t bytes = 0;
};

// Runs requests issued together (a group, or one call) to completion.
Status executeRequests(std::vector<Request>& requests);

}  // namespace lanes
