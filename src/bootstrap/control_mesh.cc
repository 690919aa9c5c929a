// ControlMesh: the channel table, sending, and closing. The monitor thread
// is in monitor.cc.
#include "bootstrap/control_mesh.h"

#include <sys/socket.h>

#include <limits>

#include "base/log.h"
#include "bootstrap/channel_inbox.h"
#include "bootstrap/wire.h"

namespace lanes {

ControlMesh::ControlMesh(const UniqueIdData& id, int rank, std::vector<RankInfo> ranks,
                         std::vector<Socket> peers)
    : id_(id), rank_(rank), ranks_(std::move(ranks)), lost_(ranks_.size()) {
  for (size_t i = 0; i < ranks_.size(); ++i) {
    peers_.emplace_back();
    if (static_cast<int>(i) == rank_) continue;
    peers_.back() = std::make_unique<Peer>();
    peers_.back()->sock = std::move(peers[i]);
    peers_.back()->polling = true;
  }
}

ControlMesh::~ControlMesh() { stop(/*graceful=*/true); }

Status ControlMesh::start() {
  if (wake_.fd() < 0)
    return systemError("eventfd for the bootstrap monitor failed: " + errnoText(errno));
  monitor_ = std::thread([this] { monitorLoop(); });
  return Status::ok();
}

std::string ControlMesh::describe(int rank) const {
  return wire::describeRank(ranks_[static_cast<size_t>(rank)]);
}

Status ControlMesh::newChannel(uint32_t* channel) {
  // Rank r makes r + size * k for k = 1, 2, ...: unique across the mesh
  // without asking anyone, and never the root channel.
  const uint64_t k = channelsMade_.fetch_add(1) + 1;
  const uint64_t c = static_cast<uint64_t>(rank_) + static_cast<uint64_t>(size()) * k;
  if (c > std::numeric_limits<uint32_t>::max())
    return invalidUsage("rank " + std::to_string(rank_) + " has made " + std::to_string(k - 1) +
                        " communicators over the control connections of one communicator, "
                        "the most it can; make new ones from a fresh unique id");
  *channel = static_cast<uint32_t>(c);
  return Status::ok();
}

Status ControlMesh::attach(uint32_t channel, const std::shared_ptr<ChannelInbox>& inbox) {
  std::lock_guard<std::mutex> lock(channelsMutex_);
  if (channels_.count(channel) || detached_.count(channel))
    return internalError("control channel " + std::to_string(channel) +
                         " is already in use in this process");
  channels_[channel] = inbox;
  // Under the lock, so no later frame of the channel overtakes these; the
  // inbox has no failure handler yet, so nothing here calls out.
  auto early = early_.find(channel);
  if (early != early_.end()) {
    for (ControlFrame& f : early->second) inbox->handleFrame(f);
    early_.erase(early);
  }
  for (int m : inbox->members())
    if (!lost_[static_cast<size_t>(m)].empty())
      inbox->connectionLost(m, lost_[static_cast<size_t>(m)]);
  return Status::ok();
}

void ControlMesh::detach(uint32_t channel) {
  {
    std::lock_guard<std::mutex> lock(channelsMutex_);
    channels_.erase(channel);
    early_.erase(channel);
    detached_.insert(channel);
  }
  // From a failure handler the dispatch in progress is the caller's own.
  if (!onMonitorThread()) {
    std::lock_guard<std::mutex> wait(dispatchMutex_);
  }
}

Status ControlMesh::send(int peer, uint32_t channel, uint16_t type, uint32_t tag, const void* data,
                         size_t bytes, Deadline deadline) {
  Peer& p = *peers_[static_cast<size_t>(peer)];
  std::lock_guard<std::mutex> lock(p.writeMutex);
  if (!p.sock.valid()) return invalidUsage("this process already closed its control connections");
  return sendFrame(p.sock, type, tag, data, bytes, deadline, channel);
}

void ControlMesh::closeAbruptly() { stop(/*graceful=*/false); }

void ControlMesh::stop(bool graceful) {
  std::lock_guard<std::mutex> lock(stopMutex_);
  if (stopped_) return;
  stopped_ = true;
  stopRequested_.store(true);
  wake_.signal();
  if (monitor_.joinable()) monitor_.join();
  for (auto& peer : peers_) {
    if (!peer) continue;
    std::lock_guard<std::mutex> wl(peer->writeMutex);
    if (!peer->sock.valid()) continue;
    if (graceful) {
      // Send FIN after the goodbyes and drop unread bytes, so close() does
      // not answer with a reset that could overtake a goodbye.
      ::shutdown(peer->sock.fd(), SHUT_WR);
      uint8_t sink[4096];
      size_t n = 0;
      while (peer->sock.tryRecv(sink, sizeof(sink), &n).isOk() && n > 0) {
      }
    }
    peer->sock.reset();
  }
}

}  // namespace lanes
