#include "transport/socket/socket_side.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "base/log.h"
#include "bootstrap/wire.h"

namespace lanes {
namespace {

// Waits are cut into slices this long, so that a connection closed while it
// connects (abort, or a peer declared dead) stops within one.
constexpr double kSliceSeconds = 0.1;

Deadline slice(Deadline deadline) {
  Deadline s = Deadline::after(kSliceSeconds);
  return deadline.at() < s.at() ? deadline : s;
}

Status abandonedError(int peer) {
  return remoteError("the socket connection to peer rank " + std::to_string(peer) +
                     " was closed on this side while it connected");
}

}  // namespace

SocketSide::SocketSide(const UniqueIdData& id, int rank, const SocketSettings& settings,
                       std::vector<SocketAddress> endpoints, std::shared_ptr<SocketHub> hub)
    : id_(id),
      rank_(rank),
      settings_(settings),
      endpoints_(std::move(endpoints)),
      hub_(std::move(hub)),
      links_(endpoints_.size()) {}

Status SocketSide::create(const UniqueIdData& id, int rank, const SocketSettings& settings,
                          std::vector<SocketAddress> endpoints, std::shared_ptr<SocketHub> hub,
                          std::shared_ptr<SocketSide>* out) {
  auto side = std::make_shared<SocketSide>(id, rank, settings, std::move(endpoints), hub);
  Status st = hub->add(id.commId, rank, side.get());
  if (!st.isOk()) {
    side->hub_.reset();  // not registered: nothing to remove
    return st;
  }
  *out = std::move(side);
  return Status::ok();
}

SocketSide::~SocketSide() {
  if (hub_) hub_->remove(id_.commId, rank_);
}

std::string SocketSide::peerName(int peer) const {
  return "peer rank " + std::to_string(peer) + " (" + endpoint(peer).toString() + ")";
}

void SocketSide::offer(const DataHello& h, Socket* socket, std::string* why) {
  if (!wire::constantTimeEqual(h.secret, id_.secret, sizeof(h.secret))) {
    *why = "wrong secret";
    return;
  }
  const int src = h.srcRank;
  if (src < 0 || src >= static_cast<int>(links_.size()) || src == rank_) {
    *why = "it claims to be rank " + std::to_string(src);
    return;
  }
  if (h.settings != settings_ || h.socketIndex < 0 || h.socketIndex >= settings_.sockets) {
    *why = "its socket settings differ from this rank's";
    return;
  }
  std::lock_guard lock(mu_);
  PeerLink& link = links_[static_cast<size_t>(src)];
  HelloReply reply = HelloReply::kAccept;
  if (link.state == LinkState::kDialing && rank_ < src) reply = HelloReply::kDialedAlready;
  if (reply == HelloReply::kAccept) {
    link.incoming.resize(static_cast<size_t>(settings_.sockets));
    if (link.incoming[static_cast<size_t>(h.socketIndex)].valid()) {
      *why =
          "a second socket " + std::to_string(h.socketIndex) + " from rank " + std::to_string(src);
      return;
    }
  }
  // The reply goes first: once the socket is in the link, the connection
  // may send frames on it.
  size_t sent = 0;
  Status st = socket->trySend(&reply, sizeof(reply), &sent);
  if (!st.isOk() || sent != sizeof(reply)) {
    *why = "it closed the connection before the reply";
    return;
  }
  if (reply != HelloReply::kAccept) {
    socket->reset();
    return;
  }
  if (link.state == LinkState::kIdle) link.state = LinkState::kPeerDialed;
  link.incoming[static_cast<size_t>(h.socketIndex)] = std::move(*socket);
  ++link.arrived;
  arrived_.notify_all();
}

Status SocketSide::establish(int peer, const std::atomic<bool>& abandoned, Deadline deadline,
                             std::vector<Socket>* out) {
  bool dialing = false;
  {
    std::lock_guard lock(mu_);
    PeerLink& link = links_[static_cast<size_t>(peer)];
    if (link.state == LinkState::kIdle) link.state = LinkState::kDialing;
    dialing = link.state == LinkState::kDialing;
  }
  if (dialing) {
    bool accepted = false;
    LANES_RETURN_IF_ERROR(dial(peer, abandoned, deadline, out, &accepted));
    if (accepted) {
      LANES_INFO(Transport, rank_, "tcp: dialled %s, %d sockets", peerName(peer).c_str(),
                 settings_.sockets);
      return Status::ok();
    }
    LANES_INFO(Transport, rank_, "tcp: %s dialled at the same time; its sockets are kept",
               peerName(peer).c_str());
  }
  LANES_RETURN_IF_ERROR(awaitIncoming(peer, abandoned, deadline, out));
  LANES_INFO(Transport, rank_, "tcp: accepted %d sockets from %s", settings_.sockets,
             peerName(peer).c_str());
  return Status::ok();
}

Status SocketSide::dial(int peer, const std::atomic<bool>& abandoned, Deadline deadline,
                        std::vector<Socket>* out, bool* accepted) {
  const SocketAddress& to = endpoint(peer);
  DataHello hello{};
  hello.magic = kDataHelloMagic;
  hello.version = kDataHelloVersion;
  std::memcpy(hello.secret, id_.secret, sizeof(hello.secret));
  hello.commId = id_.commId;
  hello.srcRank = rank_;
  hello.dstRank = peer;
  hello.settings = settings_;
  auto failed = [&](const Status& st) {
    return Status(st.code(), "rank " + std::to_string(rank_) + ": data socket to " +
                                 peerName(peer) + ": " + st.message());
  };

  std::vector<Socket> sockets(static_cast<size_t>(settings_.sockets));
  for (int i = 0; i < settings_.sockets; ++i) {
    Socket& s = sockets[static_cast<size_t>(i)];
    // The peer's hub listened before its address was published: a refusal
    // means its process is gone, and is not retried.
    Status st = Socket::connect(to, deadline, &s, /*retryRefused=*/false, &abandoned);
    if (abandoned.load(std::memory_order_acquire)) return abandonedError(peer);
    if (!st.isOk()) return failed(st);
    hello.socketIndex = i;
    st = s.sendAll(&hello, sizeof(hello), deadline);
    if (!st.isOk()) return failed(st);
  }
  // Every socket gets the same answer: the peer decides once per dial.
  for (int i = 0; i < settings_.sockets; ++i) {
    HelloReply reply{};
    Status st = timeoutError("no reply yet");
    while (st.code() == lanesTimeout && !deadline.expired()) {
      if (abandoned.load(std::memory_order_acquire)) return abandonedError(peer);
      st = sockets[static_cast<size_t>(i)].recvAll(&reply, sizeof(reply), slice(deadline));
    }
    if (!st.isOk()) {
      return failed(Status(st.code(), "no answer to its hello (" + st.message() +
                                          "); is that rank still in this communicator?"));
    }
    const bool peerWins = reply == HelloReply::kDialedAlready && peer < rank_;
    if (reply != HelloReply::kAccept && !peerWins) {
      return failed(
          internalError("the peer answered the hello with " + std::to_string(int(reply))));
    }
    if (peerWins) {
      if (i != 0) return failed(internalError("the peer changed its answer mid-dial"));
      *accepted = false;
      return Status::ok();
    }
  }
  *out = std::move(sockets);
  *accepted = true;
  return Status::ok();
}

Status SocketSide::awaitIncoming(int peer, const std::atomic<bool>& abandoned, Deadline deadline,
                                 std::vector<Socket>* out) {
  std::unique_lock lock(mu_);
  PeerLink& link = links_[static_cast<size_t>(peer)];
  while (link.arrived < settings_.sockets) {
    if (abandoned.load(std::memory_order_acquire)) return abandonedError(peer);
    if (deadline.expired()) {
      return timeoutError("rank " + std::to_string(rank_) + ": " +
                          std::to_string(settings_.sockets - link.arrived) + " of " +
                          std::to_string(settings_.sockets) + " data sockets from " +
                          peerName(peer) + " never arrived within LANES_TIMEOUT");
    }
    arrived_.wait_until(lock, slice(deadline).at());
  }
  *out = std::move(link.incoming);
  link.incoming.clear();
  return Status::ok();
}

}  // namespace lanes
