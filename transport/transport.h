// The transport seam. A Connection links this rank with one peer and offers
// `nlanes` independent ordered byte streams in each direction. Ports never
// block: the executor polls them, so one thread can drive many peers and many
// ops at once, and every wait stays under the executor's deadline.
//
// A transport never knows which collective it serves; an algorithm never
// knows which transport carries a step (Gloo's algorithm/Pair split).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/rank_info.h"
#include "base/status.h"
#include "transport/transport_config.h"

namespace lanes {

class SendPort {
 public:
  virtual ~SendPort() = default;
  // Takes up to `bytes` from `src` and returns how many it took in *taken
  // (a multiple of kRingGranule unless it took all of `bytes`, which the
  // executor always pads to the granule). Error once the connection failed.
  virtual Status post(const void* src, size_t bytes, size_t* taken) = 0;
};

class RecvPort {
 public:
  virtual ~RecvPort() = default;
  // The contiguous bytes received and not yet consumed (a multiple of
  // kRingGranule), possibly empty. Error once the connection failed and
  // nothing is left to read.
  virtual Status peek(std::span<const std::byte>* view) = 0;
  // Frees the first `bytes` of the last view for the sender.
  virtual void consume(size_t bytes) = 0;
};

// How long a communicator's graceful destroy waits, all connections
// together, for bytes already posted to leave (Connection::drain).
inline constexpr double kConnectionDrainSeconds = 5;

class Connection {
 public:
  // Destruction drains (below) with a deadline of its own unless drain()
  // ran before.
  virtual ~Connection() = default;
  virtual int peer() const = 0;
  virtual const char* transportName() const = 0;  // "shm", "tcp", ...
  virtual int lanes() const = 0;
  virtual SendPort& sendPort(int lane) = 0;
  virtual RecvPort& recvPort(int lane) = 0;
  // Whether polling this side's ports makes system calls (an engine that
  // reads its sockets itself): a busy-wait iteration then costs
  // microseconds, not the nanoseconds of a flag in memory.
  virtual bool pollingMakesSystemCalls() const { return false; }
  // Wakes and fails every port of this side (abort, or a peer declared
  // dead). The peer's ports fail too where the transport can tell it (a
  // socket's end, rings both sides hold); otherwise the communicator's
  // failure notice or the peer's deadline ends its waits.
  virtual void close() = 0;
  // Waits until `deadline` at most for the bytes posted so far to leave this
  // side (a post returns once they are in the transport's own buffer), so
  // that a destroy right after a send does not drop its tail; true once
  // nothing is left to wait for (all left, or the connection failed). A
  // communicator drains all its connections in turn, in short slices, under
  // one deadline before destroying them: a destroy with many slow peers
  // waits once, not once per peer, and a connection that moves only while
  // it is polled (verbs) is polled throughout.
  virtual bool drain(Deadline deadline) = 0;
};

class Bootstrap;

// Everything a transport needs to connect: the out-of-band channel, who is
// who, and a name unique to this communicator for OS objects (shm segments).
struct TransportContext {
  Bootstrap* bootstrap = nullptr;
  int rank = -1;
  int nranks = 0;
  const std::vector<RankInfo>* ranks = nullptr;
  std::string commTag;  // e.g. "lanes-<hex id>", safe for shm names
  int lanes = 2;
  double timeoutSeconds = 300;
  TransportConfig config;  // the knobs, read once by the communicator
  // Polled by long waits in connect(): non-OK once the communicator failed
  // (e.g. a peer reported that it could not connect), so a rank waiting for
  // that peer's sockets gives up at once instead of at the deadline.
  std::function<Status()> checkAbort;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  virtual bool canConnect(const RankInfo& self, const RankInfo& peer) const = 0;
  // Collective over all ranks of the communicator (every rank calls it, with
  // the peers it will reach through this transport, possibly none).
  // Fills out[i] with the connection to peers[i], or leaves it empty where
  // both ranks agree the pair goes to the next transport instead.
  virtual Status connect(const TransportContext& ctx, const std::vector<int>& peers,
                         std::vector<std::unique_ptr<Connection>>* out) = 0;
};

std::unique_ptr<Transport> makeShmTransport();
std::unique_ptr<Transport> makeSocketTransport();
// nullptr where Lanes was built without rdma-core's headers (libibverbs-dev).
std::unique_ptr<Transport> makeIbTransport();

}  // namespace lanes
