// The monitor thread of a ControlMesh: accepts peers' connections, reads
// every one and hands each frame to its channel's inbox (or keeps it until
// that channel is attached); a lost rank goes to every inbox, and a death on
// to every connected rank.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/log.h"
#include "bootstrap/channel_inbox.h"
#include "bootstrap/control_mesh.h"
#include "bootstrap/wire.h"

namespace lanes {

namespace {

// Unidentified connections the control listener holds at once.
constexpr size_t kMaxPendingConnections = 1024;
// How long passing on a death may take per connection.
constexpr double kLostNoticeSeconds = 2.0;
// How long the listener rests after accept() failed (e.g. out of descriptors).
constexpr double kAcceptPauseSeconds = 0.1;

}  // namespace

void ControlMesh::monitorLoop() {
  std::vector<pollfd> fds;
  struct Source {
    int peer;  // -1: the listener, -2: a pending connection
    int slot;  // the peer's slot, or the pending connection's index
  };
  std::vector<Source> who;
  while (!stopRequested_.load()) {
    fds.assign(1, pollfd{wake_.fd(), POLLIN, 0});
    who.assign(1, Source{-3, 0});
    int waitMs = 1000;  // the timeout only re-checks the stop flag
    // A full queue of unidentified connections leaves the rest in the
    // kernel's backlog rather than closing them.
    if (listener_.valid() && acceptPause_.expired() && pending_.size() < kMaxPendingConnections) {
      fds.push_back({listener_.fd(), POLLIN, 0});
      who.push_back({-1, 0});
    } else if (listener_.valid() && !acceptPause_.expired()) {
      waitMs = std::min(waitMs, std::max(1, acceptPause_.remainingMs()));
    }
    for (size_t i = 0; i < pending_.size(); ++i) {
      fds.push_back({pending_[i].sock.fd(), POLLIN, 0});
      who.push_back({-2, static_cast<int>(i)});
      waitMs = std::min(waitMs, std::max(0, pending_[i].helloBy.remainingMs()));
    }
    {
      std::lock_guard<std::mutex> lock(connMutex_);
      for (int p = 0; p < size(); ++p) {
        const auto& peer = peers_[static_cast<size_t>(p)];
        for (int slot = 0; peer && slot < kSlots; ++slot)
          if (peer->polling[slot]) {
            fds.push_back({peer->socks[slot].fd(), POLLIN, 0});
            who.push_back({p, slot});
          }
      }
    }
    // Woken by data, a closed peer, a new connection or shutdown.
    int n = ::poll(fds.data(), fds.size(), waitMs);
    if (n < 0) {
      if (errno == EINTR) continue;
      LANES_WARN(Bootstrap, rank_, "monitor poll failed: %s; peer failures will go unnoticed",
                 errnoText(errno).c_str());
      return;
    }
    if (fds[0].revents) {
      if (stopRequested_.load()) return;  // shutdown
      wake_.drain();                      // a new dialed connection to poll
    }
    bool accept = false;
    std::vector<bool> pendingDone(pending_.size(), false);
    for (size_t i = 1; i < fds.size() && !stopRequested_.load(); ++i) {
      const Source& s = who[i];
      if (s.peer == -1) {
        accept = fds[i].revents != 0;
      } else if (s.peer == -2) {
        bool done = false;
        readPending(pending_[static_cast<size_t>(s.slot)], fds[i].revents != 0, &done);
        pendingDone[static_cast<size_t>(s.slot)] = done;
      } else if (fds[i].revents) {
        readPeer(s.peer, s.slot);
      }
    }
    for (size_t i = pendingDone.size(); i-- > 0;)
      if (pendingDone[i]) pending_.erase(pending_.begin() + static_cast<long>(i));
    if (accept) acceptConnections();
  }
}

void ControlMesh::acceptConnections() {
  for (;;) {
    Socket s;
    Status st = listener_.accept(Deadline::after(0), &s);
    if (st.code() == lanesTimeout) return;
    if (!st.isOk()) {
      // Out of descriptors or another local failure: peers that cannot
      // connect report it, naming this rank, when they first need it.
      LANES_WARN(Bootstrap, rank_, "could not accept a control connection: %s",
                 st.message().c_str());
      acceptPause_ = Deadline::after(kAcceptPauseSeconds);  // the backlog would spin the poll
      std::lock_guard<std::mutex> lock(connMutex_);
      acceptTrouble_ = "this rank could not accept a control connection: " + st.message();
      return;
    }
    pending_.push_back(Pending{std::move(s), {}, Deadline::after(wire::kHelloTimeoutSeconds)});
    if (pending_.size() >= kMaxPendingConnections) return;
  }
}

// Reads a pending connection's hello; a rank of the mesh is answered and
// read from then on, anyone else dropped (a silent one at its deadline).
void ControlMesh::readPending(Pending& pending, bool readable, bool* done) {
  bool complete = false;
  Status st;
  if (readable)
    st = pending.reader.readSome(pending.sock, wire::kMaxHelloBytes, &complete);
  else if (pending.helloBy.expired())
    st = timeoutError("it sent no hello within " +
                      std::to_string(static_cast<int>(wire::kHelloTimeoutSeconds)) + " s");
  if (st.isOk() && !complete) return;
  *done = true;
  wire::Hello h;
  if (st.isOk())
    st = wire::checkMeshHello(id_, size(), pending.reader.payload(), pending.reader.header().type,
                              &h);
  if (st.isOk() && (h.rank < 0 || h.rank >= size() || h.rank == rank_))
    st = invalidArgument("it claims rank " + std::to_string(h.rank) + ", which is not a peer");
  Peer* peer = st.isOk() ? peers_[static_cast<size_t>(h.rank)].get() : nullptr;
  if (peer) {
    // A connection of the peer's that this monitor stopped reading (closed,
    // broken) gives way to its new one.
    std::lock_guard<std::mutex> lock(connMutex_);
    if (peer->polling[kAccepted])
      st = invalidArgument("rank " + std::to_string(h.rank) + " is already connected");
  }
  if (st.isOk()) {
    const auto mine = wire::encodeHello(wire::meshHello(id_, size(), rank_), /*toRoot=*/false);
    st = sendFrame(pending.sock, wire::kHello, 0, mine.data(), mine.size(), Deadline::after(1.0));
  }
  if (!st.isOk()) {
    LANES_WARN(Bootstrap, rank_, "dropped control connection from %s: %s%s",
               pending.sock.peerName().c_str(), st.message().c_str(),
               peer ? "" : " (not a rank of this communicator)");
    return;
  }
  {
    std::lock_guard<std::mutex> lock(connMutex_);
    peer->socks[kAccepted] = std::move(pending.sock);
    peer->polling[kAccepted] = true;
  }
  peer->readers[kAccepted].reset();
  peer->leaving = false;
  tellDeaths(h.rank);
}

void ControlMesh::tellDeaths(int peer) {
  std::vector<std::pair<int, std::string>> deaths;
  {
    std::lock_guard<std::mutex> lock(lostMutex_);
    for (int q = 0; q < size(); ++q)
      if (q != peer && died_[static_cast<size_t>(q)])
        deaths.emplace_back(q, lost_[static_cast<size_t>(q)]);
  }
  for (const auto& [dead, why] : deaths) {
    const auto notice = wire::encodeFailureNotice(dead, why);
    (void)send(peer, kRootChannel, wire::kLost, 0, notice.data(), notice.size(),
               Deadline::after(kLostNoticeSeconds), /*mayConnect=*/false);
  }
}

void ControlMesh::readPeer(int p, int slot) {
  Peer& peer = *peers_[static_cast<size_t>(p)];
  FrameReader& reader = peer.readers[slot];
  for (;;) {
    bool complete = false;
    Status st = reader.readSome(peer.socks[slot], wire::kMaxDataBytes, &complete);
    if (!st.isOk()) {
      bool beforeHello = false, lastOpen = false;
      {
        std::lock_guard<std::mutex> lock(connMutex_);
        peer.polling[slot] = false;
        beforeHello = slot == kDialed && peer.awaitingHello;
        peer.awaitingHello = peer.awaitingHello && slot != kDialed;
        lastOpen = !peer.polling[kDialed] && !peer.polling[kAccepted];
      }
      reader.reset();
      const bool closed = st.code() == lanesRemoteError;
      if (closed && !lastOpen) return;  // the pair's other connection still carries it
      if (!closed) {
        peerLost(p,
                 "sent a corrupt control frame (" + st.message() +
                     "); this rank stopped listening to it",
                 /*died=*/false, p);
      } else if (beforeHello) {
        // Its process closed the connection before answering: it left or
        // died; a death its tree neighbours see and pass on.
        peerLost(p, "closed its control connection: the process exited or was killed",
                 /*died=*/false, p);
      } else {
        peerLost(p, "closed its control connection: the process exited or was killed",
                 /*died=*/!peer.leaving, p);
      }
      return;
    }
    if (!complete) return;
    const FrameHeader h = reader.header();
    bool hello = false;
    {
      std::lock_guard<std::mutex> lock(connMutex_);
      hello = slot == kDialed && peer.awaitingHello;
      if (hello) peer.awaitingHello = false;
    }
    if (hello) {
      wire::Hello answer;
      Status ok = wire::checkMeshHello(id_, size(), reader.payload(), h.type, &answer);
      if (ok && answer.rank != p)
        ok = invalidArgument("the process there says it is rank " + std::to_string(answer.rank));
      reader.reset();
      if (!ok) {
        {
          std::lock_guard<std::mutex> lock(connMutex_);
          peer.polling[slot] = false;
        }
        ::shutdown(peer.socks[slot].fd(), SHUT_RDWR);  // this rank's sends on it fail from now on
        LANES_WARN(Bootstrap, rank_, "control connection to %s at %s refused: %s",
                   describe(p).c_str(), listenOf(p).toString().c_str(), ok.message().c_str());
        peerLost(
            p, "could not be reached: the process at its address is not it (" + ok.message() + ")",
            /*died=*/false, p);
        return;
      }
      tellDeaths(p);
      continue;
    }
    if (h.type == wire::kLeaving)
      peer.leaving = true;
    else if (h.type == wire::kLost)
      handleLostNotice(p, reader.payload());
    else
      deliver(h.channel, ControlFrame{p, h.type, h.tag, std::move(reader.payload())});
    reader.reset();
  }
}

void ControlMesh::deliver(uint32_t channel, ControlFrame frame) {
  std::lock_guard<std::mutex> dispatching(dispatchMutex_);
  std::shared_ptr<ChannelInbox> inbox;
  {
    std::lock_guard<std::mutex> lock(channelsMutex_);
    auto it = channels_.find(channel);
    if (it != channels_.end()) {
      inbox = it->second;
    } else if (!detached_.count(channel)) {
      // A peer already runs a communicator this rank has not joined yet.
      early_[channel].push_back(std::move(frame));
      return;
    }
  }
  if (inbox) inbox->handleFrame(frame);
}

void ControlMesh::handleLostNotice(int from, const std::vector<uint8_t>& payload) {
  int32_t dead = -1;
  std::string why;
  if (!wire::decodeFailureNotice(payload, size(), &dead, &why).isOk()) {
    LANES_WARN(Bootstrap, rank_, "%s sent a malformed notice of a lost rank; ignored",
               describe(from).c_str());
    return;
  }
  if (dead == rank_) {
    LANES_WARN(Bootstrap, rank_, "%s reports that this rank's process is gone: %s",
               describe(from).c_str(), why.c_str());
    return;
  }
  if (connectionStandsOpen(dead)) {
    // This rank's own connection to the rank reported dead is open and not
    // hung up: the reporter's connections may be what broke. The report
    // fails this rank's communicators all the same, naming the reporter, and
    // goes no further (a death it did not see, passed on, would blame the
    // wrong rank everywhere) until that connection closes too.
    peerLost(dead,
             "was reported gone by " + describe(from) + " (\"" + why +
                 "\"), while this rank's control connection to it is still open: " +
                 describe(from) + " or the network between them may be at fault",
             /*died=*/false, from, /*contradicted=*/true);
    return;
  }
  peerLost(dead, why, /*died=*/true, from);
}

bool ControlMesh::connectionStandsOpen(int peer) const {
  std::vector<pollfd> fds;
  {
    std::lock_guard<std::mutex> lock(connMutex_);
    const auto& p = peers_[static_cast<size_t>(peer)];
    for (int slot = 0; p && slot < kSlots; ++slot)
      if (p->polling[slot]) fds.push_back({p->socks[slot].fd(), POLLRDHUP, 0});
  }
  // Sockets are closed and replaced only where the monitor (this thread)
  // stopped polling them, so the descriptors stay valid here. A hang-up
  // shows before the frames ahead of it are read.
  if (fds.empty() || ::poll(fds.data(), fds.size(), 0) < 0) return false;
  for (const pollfd& f : fds)
    if (f.revents & (POLLRDHUP | POLLHUP | POLLERR)) return false;
  return true;
}

void ControlMesh::peerLost(int p, const std::string& why, bool died, int heardFrom,
                           bool contradicted) {
  std::lock_guard<std::mutex> dispatching(dispatchMutex_);
  std::vector<std::shared_ptr<ChannelInbox>> inboxes;
  bool confirmed = false;
  {
    std::lock_guard<std::mutex> lock(channelsMutex_);
    std::lock_guard<std::mutex> lost(lostMutex_);
    const size_t i = static_cast<size_t>(p);
    if (!lost_[i].empty()) {
      // A contradicted report comes true once the rank's own connection
      // closes: only the passing on is still owed.
      if (!died || !contradicted_[i]) return;  // known already
      confirmed = true;
    } else {
      for (auto& [channel, inbox] : channels_) inboxes.push_back(inbox);
    }
    lost_[i] = why;
    died_[i] = died;
    contradicted_[i] = contradicted;
  }
  if (confirmed)
    LANES_WARN(Bootstrap, rank_, "%s %s too: it is gone, and the report was right",
               describe(p).c_str(), why.c_str());
  else
    LANES_TRACE(Bootstrap, rank_, "%s %s", describe(p).c_str(), why.c_str());
  // Passed on before any inbox hears it: a communicator that fails may be
  // destroyed at once, and this process's connections with it.
  if (died) {
    const auto notice = wire::encodeFailureNotice(p, why);
    for (int q = 0; q < size(); ++q) {
      if (q == rank_ || q == p || q == heardFrom || !connected(q)) continue;
      Status st = send(q, kRootChannel, wire::kLost, 0, notice.data(), notice.size(),
                       Deadline::after(kLostNoticeSeconds), /*mayConnect=*/false);
      if (!st.isOk())
        LANES_TRACE(Bootstrap, rank_, "could not pass on that %s is gone: %s", describe(p).c_str(),
                    st.message().c_str());
    }
  }
  for (auto& inbox : inboxes) inbox->connectionLost(p, why);
}

}  // namespace lanes
