// SocketSide: one rank's socket transport in one communicator. It knows
// every peer's address (from the communicator's all-gather) but holds no
// socket until a connection to a peer is first used: then that connection
// asks establish() for its sockets, and only pairs that talk cost
// descriptors and threads.
//
// Either rank of a pair may start first, and both may dial at once. The
// acceptor decides each dial under its lock: a rank that is dialling its
// higher peer answers that peer's dial with kDialedAlready, and every other
// dial is accepted. So the pair ends with exactly one set of sockets: the
// lower rank's if both dialled, else the one dial made.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/socket.h"
#include "bootstrap/bootstrap.h"
#include "transport/socket/socket_hub.h"

namespace lanes {

class SocketSide final : public HelloTarget {
 public:
  // Registers with `hub`; `endpoints[r]` is rank r's hub address.
  static Status create(const UniqueIdData& id, int rank, const SocketSettings& settings,
                       std::vector<SocketAddress> endpoints, std::shared_ptr<SocketHub> hub,
                       std::shared_ptr<SocketSide>* out);
  SocketSide(const UniqueIdData& id, int rank, const SocketSettings& settings,
             std::vector<SocketAddress> endpoints, std::shared_ptr<SocketHub> hub);
  ~SocketSide() override;
  SocketSide(const SocketSide&) = delete;
  SocketSide& operator=(const SocketSide&) = delete;

  void offer(const DataHello& hello, Socket* socket, std::string* why) override;

  // The settings.sockets sockets to `peer`, dialled or accepted, in index
  // order. Waits until `deadline`, or until `abandoned` is set.
  Status establish(int peer, const std::atomic<bool>& abandoned, Deadline deadline,
                   std::vector<Socket>* out);
  const SocketAddress& endpoint(int peer) const { return endpoints_[static_cast<size_t>(peer)]; }

 private:
  enum class LinkState { kIdle, kDialing, kPeerDialed };
  struct PeerLink {
    LinkState state = LinkState::kIdle;
    std::vector<Socket> incoming;  // the peer's dial, by socket index
    int arrived = 0;
  };
  // Dials every socket to `peer`; *accepted is false when the peer's own
  // dial wins (it answered kDialedAlready).
  Status dial(int peer, const std::atomic<bool>& abandoned, Deadline deadline,
              std::vector<Socket>* out, bool* accepted);
  Status awaitIncoming(int peer, const std::atomic<bool>& abandoned, Deadline deadline,
                       std::vector<Socket>* out);
  std::string peerName(int peer) const;

  UniqueIdData id_;
  int rank_;
  SocketSettings settings_;
  std::vector<SocketAddress> endpoints_;
  std::shared_ptr<SocketHub> hub_;
  std::mutex mu_;
  std::condition_variable arrived_;
  std::vector<PeerLink> links_;  // by peer rank
};

}  // namespace lanes
