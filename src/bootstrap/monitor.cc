// The monitor thread of a ControlMesh: reads every peer's control
// connection and hands each frame to its channel's inbox (or keeps it until
// that channel is attached); a closed connection goes to every inbox.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "base/log.h"
#include "bootstrap/channel_inbox.h"
#include "bootstrap/control_mesh.h"
#include "bootstrap/wire.h"

namespace lanes {

WakeFd::WakeFd() : fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

WakeFd::~WakeFd() {
  if (fd_ >= 0) ::close(fd_);
}

void WakeFd::signal() const {
  uint64_t one = 1;
  ssize_t n = ::write(fd_, &one, sizeof(one));
  (void)n;  // a full counter already wakes the poll
}

void ControlMesh::monitorLoop() {
  std::vector<pollfd> fds;
  std::vector<int> who;
  while (!stopRequested_.load()) {
    fds.assign(1, pollfd{wake_.fd(), POLLIN, 0});
    who.assign(1, -1);
    for (int p = 0; p < size(); ++p) {
      const auto& peer = peers_[static_cast<size_t>(p)];
      if (peer && peer->polling) {
        fds.push_back({peer->sock.fd(), POLLIN, 0});
        who.push_back(p);
      }
    }
    // Woken by data, a closed peer or shutdown; the timeout only re-checks the stop flag.
    int n = ::poll(fds.data(), fds.size(), 1000);
    if (n < 0) {
      if (errno == EINTR) continue;
      LANES_WARN(Bootstrap, rank_, "monitor poll failed: %s; peer failures will go unnoticed",
                 errnoText(errno).c_str());
      return;
    }
    if (fds[0].revents) return;  // shutdown
    for (size_t i = 1; i < fds.size() && !stopRequested_.load(); ++i)
      if (fds[i].revents) readPeer(who[i]);
  }
}

void ControlMesh::readPeer(int p) {
  Peer& peer = *peers_[static_cast<size_t>(p)];
  for (;;) {
    bool complete = false;
    Status st = peer.reader.readSome(peer.sock, wire::kMaxDataBytes, &complete);
    if (!st.isOk()) {
      peer.polling = false;
      connectionLost(p, st.code() == lanesRemoteError
                            ? "closed its control connection: the process exited or was killed"
                            : "sent a corrupt control frame (" + st.message() +
                                  "); this rank stopped listening to it");
      return;
    }
    if (!complete) return;
    const FrameHeader h = peer.reader.header();
    deliver(h.channel, ControlFrame{p, h.type, h.tag, std::move(peer.reader.payload())});
    peer.reader.reset();
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

void ControlMesh::connectionLost(int p, const std::string& why) {
  std::lock_guard<std::mutex> dispatching(dispatchMutex_);
  std::vector<std::shared_ptr<ChannelInbox>> inboxes;
  {
    std::lock_guard<std::mutex> lock(channelsMutex_);
    lost_[static_cast<size_t>(p)] = why;
    for (auto& [channel, inbox] : channels_) inboxes.push_back(inbox);
  }
  LANES_TRACE(Bootstrap, rank_, "%s %s", describe(p).c_str(), why.c_str());
  for (auto& inbox : inboxes) inbox->connectionLost(p, why);
}

}  // namespace lanes
