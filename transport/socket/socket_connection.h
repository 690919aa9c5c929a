// SocketConnection: one peer reached over TCP through S = threads x sockets
// data sockets.
//
// Each lane-direction is a byte stream. post() copies into a private send
// buffer; worker threads move stripes of it (StripeMap) onto the sockets in
// frames {kind, lane, length, offset}, and the peer's workers receive them
// straight into the lane's receive buffer at their stream offset. Flow
// control is by credit: a sender never sends past the peer's consumed offset
// plus the buffer size, so a receiving worker always has room and one full
// lane never stalls another lane sharing its socket. Workers sleep in poll()
// on their sockets and an eventfd that post()/consume() ring when needed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/socket.h"
#include "transport/transport.h"

namespace lanes {

struct SocketConnectionConfig {
  int rank = -1;  // this rank, for log lines
  int peer = -1;
  std::string peerAddress;  // for error messages
  int lanes = 1;
  int threads = 2;
  int socketsPerThread = 1;
  size_t bufferBytes = 4u << 20;  // per lane and direction, a multiple of stripeBytes
  size_t stripeBytes = 128u << 10;
};

// Takes the connected sockets (threads * socketsPerThread, in index order)
// and starts the workers.
Status makeSocketConnection(const SocketConnectionConfig& config, std::vector<Socket> sockets,
                            std::unique_ptr<Connection>* out);

// Payload bytes each data socket of `c` has sent so far (for tests: a large
// stream must use them all). Empty when `c` is not a socket connection.
std::vector<uint64_t> socketPayloadBytesSent(const Connection& c);

}  // namespace lanes
