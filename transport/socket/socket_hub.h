// SocketHub: the data listener of a process. Every socket connection of
// every communicator in the process is reached at one address per
// (network namespace, interface choice, family); one thread accepts, reads
// each hello and hands the socket to the communicator side it names (by
// commId and rank), which answers it. A stranger, a silent socket or a hello
// for no side here is refused and logged. The hub lives while a side holds
// it: the first communicator with socket peers opens it, the last one
// closes it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/socket.h"
#include "base/status.h"
#include "transport/socket/data_hello.h"

namespace lanes {

// The receiving end of hellos: one communicator's socket transport on one rank.
class HelloTarget {
 public:
  virtual ~HelloTarget() = default;
  // Called on the hub's thread with a complete hello naming this target.
  // Takes the socket (after writing the reply) or leaves it to be closed,
  // setting *why for the refusal's log line.
  virtual void offer(const DataHello& hello, Socket* socket, std::string* why) = 0;
};

class SocketHub {
 public:
  // The hub for `ifname` (LANES_SOCKET_IFNAME's syntax) and `family` in this
  // thread's network namespace, opened if no communicator holds it.
  static Status acquire(const std::string& ifname, int family, int rank,
                        std::shared_ptr<SocketHub>* out);
  virtual ~SocketHub() = default;
  virtual const SocketAddress& address() const = 0;
  // Routes hellos for (commId, rank) to `target` until removed. Fails if
  // another target holds the key (one communicator joined twice).
  virtual Status add(uint64_t commId, int rank, HelloTarget* target) = 0;
  // After this returns, `target` is never called again.
  virtual void remove(uint64_t commId, int rank) = 0;
};

}  // namespace lanes
