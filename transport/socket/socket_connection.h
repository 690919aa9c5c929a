// SocketConnection: one peer reached over TCP through S = threads x sockets
// data sockets.
//
// Each lane-direction is a byte stream. post() copies into a private send
// buffer; worker threads move stripes of it (StripeMap) onto the sockets in
// frames {kind, lane, length, offset} (large ones with MSG_ZEROCOPY, the
// buffer reused only once the kernel reports it done with those pages), and
// the peer's workers receive them straight into the lane's receive buffer at
// their stream offset. Flow
// control is by credit: a sender never sends past the peer's consumed offset
// plus the buffer size, so a receiving worker always has room and one full
// lane never stalls another lane sharing its socket. Workers sleep in poll()
// on their sockets and an eventfd that post()/consume() ring when needed. A
// small post (one commit piece) is sent by post() itself where the sockets
// are free, which spares the wake-up; each socket's framing state is taken
// under its own mutex by whichever thread sends.
//
// Where the engine moves the bytes (config.engineMoves, for a host whose
// engines and workers outnumber its cores) its port calls do the workers'
// job, as an MPI progress engine does: post() sends frames straight from
// the caller's bytes as far as the kernel takes them (the executor posts
// the rest again), a call that finds nothing to move reads the sockets into
// the rings, consume() sends the credit. A worker then only finishes what a
// call left (a frame the kernel took in part, a credit whose socket was
// busy), and reads the sockets only once the engine has made no call for
// kEngineQuietMs: a thread switch per packet is what such a host cannot
// afford. While the engine goes on calling, a worker looks again at
// doubling intervals (up to kEngineWatchMaxMs), not every millisecond.
//
// Nothing is opened until the connection is first used: the first post()
// or peek() allocates the buffers and starts the first worker, which gets
// the sockets from `establish` (dialled or accepted) and then starts the
// others. A connection never used costs no descriptor, thread or buffer.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/socket.h"
#include "transport/transport.h"
#include "transport/transport_config.h"

namespace lanes {

struct SocketConnectionConfig {
  int rank = -1;  // this rank, for log lines
  int peer = -1;
  std::string peerAddress;  // for error messages
  int lanes = 1;
  int threads = 2;
  int socketsPerThread = 1;
  // Per lane and direction, a multiple of stripeBytes.
  size_t bufferBytes = kDefaultSocketRingBytes;
  size_t stripeBytes = 512u << 10;
  // Frames of at least this many payload bytes go with MSG_ZEROCOPY where the
  // kernel sends them without a copy (0: never).
  size_t zeroCopyMinBytes = 64u << 10;
  // Workers keep polling their sockets this long after the last byte moved
  // before they sleep, and ask the kernel to busy-poll the sockets as long
  // (SO_BUSY_POLL); 0: sleep at once.
  int busyPollUs = 0;
  // The engine's own port calls move the bytes (a host short of cores):
  // posts are sent from the caller's bytes, receives read the sockets, and
  // the workers only finish what a call left. Otherwise the workers move
  // every byte through the connection's rings.
  bool engineMoves = false;
};

// Called on the first worker's thread: fills the threads * socketsPerThread
// connected sockets, in index order, or fails. Gives up once `abandoned` is
// set (the connection was closed).
using EstablishSockets =
    std::function<Status(const std::atomic<bool>& abandoned, std::vector<Socket>* sockets)>;

Status makeSocketConnection(const SocketConnectionConfig& config, EstablishSockets establish,
                            std::unique_ptr<Connection>* out);

// Payload bytes each data socket of `c` has sent so far (for tests: a large
// stream must use them all). Empty when `c` is not a socket connection.
std::vector<uint64_t> socketPayloadBytesSent(const Connection& c);

// Per data socket of `c`: sends made with MSG_ZEROCOPY, the kernel's reports
// that it copied them after all, and whether that turned zero-copy off.
struct ZeroCopyCounts {
  uint64_t sends = 0;
  uint64_t copiedReports = 0;
  bool turnedOff = false;
};
std::vector<ZeroCopyCounts> socketZeroCopyCounts(const Connection& c);

// For tests: payload bytes of `c` the engine sent straight from the caller's
// bytes (where the engine moves the bytes this must grow); the times a
// worker's look at a calling engine ended by its timer, and the times a
// worker that had lengthened those looks found the engine quiet and started
// again from the shortest; the payload bytes the workers read off the
// sockets.
struct SocketMoveCounts {
  uint64_t sentFromCaller = 0;
  uint64_t engineWatchWakeups = 0;
  uint64_t engineWatchRestarts = 0;
  uint64_t workerReadBytes = 0;
};
SocketMoveCounts socketMoveCounts(const Connection& c);

}  // namespace lanes
