// One API call waiting to run: a collective or one side of a send/recv.
// Calls outside a group run at once as a group of one.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/collective.h"
#include "base/datatype.h"
#include "lanes/lanes.h"

struct lanesComm;

namespace lanes {

struct Request {
  lanesComm* comm = nullptr;
  bool isP2p = false;
  // Collective.
  CollArgs args;
  RedOp op;  // the op as the user asked (Avg, PreMulSum included)
  // Bytes this rank reads from send and writes to recv (collectives and p2p).
  size_t sendBytes = 0;
  size_t recvBytes = 0;
  // Device buffers run on the stream; host buffers complete before the call returns.
  bool onDevice = false;
  // A staged copy of a device call that the proxy runs on the host engine.
  bool viaProxy = false;
  cudaStream_t stream = nullptr;
  // Send/recv.
  bool isSend = false;
  int peer = -1;
  const void* sendbuf = nullptr;
  void* recvbuf = nullptr;
  size_t bytes = 0;
};

}  // namespace lanes
