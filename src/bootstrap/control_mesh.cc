// ControlMesh: the channel table, sending, and closing. The monitor thread
// is in monitor.cc.
#include "bootstrap/control_mesh.h"

#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <limits>

#include "base/log.h"
#include "bootstrap/channel_inbox.h"
#include "bootstrap/wire.h"

namespace lanes {

ControlMesh::ControlMesh(const UniqueIdData& id, int rank, std::vector<RankInfo> ranks,
                         std::vector<SocketAddress> listens, Socket listener)
    : id_(id),
      rank_(rank),
      size_(static_cast<int>(ranks.size())),
      ranks_(std::move(ranks)),
      listens_(std::move(listens)),
      listener_(std::move(listener)),
      lost_(static_cast<size_t>(size_)),
      died_(static_cast<size_t>(size_), false),
      contradicted_(static_cast<size_t>(size_), false) {
  for (size_t i = 0; i < static_cast<size_t>(size_); ++i)
    peers_.push_back(static_cast<int>(i) == rank_ ? nullptr : std::make_unique<Peer>());
}

ControlMesh::~ControlMesh() { stop(/*graceful=*/true); }

Status ControlMesh::start() {
  if (wake_.fd() < 0)
    return systemError("eventfd for the bootstrap monitor failed: " + errnoText(errno));
  monitor_ = std::thread([this] { monitorLoop(); });
  return Status::ok();
}

std::string ControlMesh::describe(int rank) const {
  std::lock_guard<std::mutex> lock(tableMutex_);
  const RankInfo& info = ranks_[static_cast<size_t>(rank)];
  if (info.rank != rank) return "rank " + std::to_string(rank);  // not gathered yet
  return wire::describeRank(info);
}

std::vector<RankInfo> ControlMesh::ranks() const {
  std::lock_guard<std::mutex> lock(tableMutex_);
  return ranks_;
}

SocketAddress ControlMesh::listenOf(int rank) const {
  std::lock_guard<std::mutex> lock(tableMutex_);
  return listens_[static_cast<size_t>(rank)];
}

void ControlMesh::completeTable(const std::vector<RankInfo>& ranks,
                                const std::vector<SocketAddress>& listens) {
  std::lock_guard<std::mutex> lock(tableMutex_);
  for (size_t i = 0; i < ranks_.size() && i < ranks.size(); ++i) {
    ranks_[i] = ranks[i];
    listens_[i] = listens[i];
  }
}

Status ControlMesh::newChannel(uint32_t* channel) {
  // Rank r makes r + size * k for k = 1, 2, ...: unique across the mesh
  // without asking anyone, and never the root or the table channel.
  const uint64_t k = channelsMade_.fetch_add(1) + 1;
  const uint64_t c = static_cast<uint64_t>(rank_) + static_cast<uint64_t>(size()) * k;
  if (c >= kTableChannel)
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
  for (int m : inbox->members()) {
    const std::string lost = lostReason(m);
    if (!lost.empty()) inbox->connectionLost(m, lost);
  }
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
                         size_t bytes, Deadline deadline, bool mayConnect) {
  Peer& p = *peers_[static_cast<size_t>(peer)];
  std::unique_lock<std::mutex> lock(p.writeMutex, std::defer_lock);
  if ((mayConnect && !onMonitorThread()) || deadline.at() == Clock::time_point::max()) {
    lock.lock();  // the writer before may be connecting: bounded by its own deadline
  } else {
    // Polled rather than timed-locked: ThreadSanitizer does not see a
    // mutex taken by a timed lock and reports its unlock.
    while (!lock.try_lock()) {
      if (deadline.expired())
        return timeoutError("the control connection stayed busy until the deadline");
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  int slot = -1;
  LANES_RETURN_IF_ERROR(writeSlot(peer, p, deadline, mayConnect, &slot));
  return sendFrame(p.socks[slot], type, tag, data, bytes, deadline, channel);
}

std::string ControlMesh::lostReason(int peer) const {
  std::lock_guard<std::mutex> lock(lostMutex_);
  return lost_[static_cast<size_t>(peer)];
}

std::string ControlMesh::refusalReason(int peer) const {
  // A rank only reported gone, over a connection that stands open, still
  // takes this rank's goodbyes and notices (its channels refuse it data).
  std::lock_guard<std::mutex> lock(lostMutex_);
  const size_t i = static_cast<size_t>(peer);
  return contradicted_[i] ? std::string() : lost_[i];
}

Status ControlMesh::writeSlot(int peer, Peer& p, Deadline deadline, bool mayConnect, int* slot) {
  if (std::string refused = refusalReason(peer); !refused.empty())
    return remoteError(std::move(refused));
  {
    std::lock_guard<std::mutex> lock(connMutex_);
    if (stopped_) return invalidUsage("this process already closed its control connections");
    // A connection the monitor stopped reading is closed or broken: never
    // written to again.
    if (p.write >= 0 && !p.polling[p.write]) p.write = -1;
    if (p.write < 0 && p.polling[kAccepted]) p.write = kAccepted;
    if (p.write < 0 && p.polling[kDialed]) p.write = kDialed;
  }
  if (p.write < 0) {
    // The monitor never waits for a connect (a host that does not answer
    // would hold up every frame of this process).
    if (!mayConnect || onMonitorThread()) return remoteError("no control connection is open to it");
    LANES_RETURN_IF_ERROR(dial(peer, p, deadline));
    p.write = kDialed;
  }
  *slot = p.write;
  return Status::ok();
}

Status ControlMesh::dial(int peer, Peer& p, Deadline deadline) {
  const SocketAddress at = listenOf(peer);
  const auto mine = wire::encodeHello(wire::meshHello(id_, size(), rank_), /*toRoot=*/false);
  Socket s;
  // The peer listened before the ranks met and listens while its mesh
  // lives: a refusal means its process is gone.
  Status st = Socket::connect(at, deadline, &s, /*retryRefused=*/false);
  if (st) st = sendFrame(s, wire::kHello, 0, mine.data(), mine.size(), deadline);
  if (!st)
    return Status(
        st.code() == lanesInvalidArgument ? lanesRemoteError : st.code(),
        "could not open a control connection to it at " + at.toString() + ": " + st.message());
  {
    std::lock_guard<std::mutex> lock(connMutex_);
    if (stopped_) return invalidUsage("this process already closed its control connections");
    // Replaces a dialed connection the monitor no longer reads, if any.
    p.socks[kDialed] = std::move(s);
    // Frames may follow the hello at once: the monitor checks the peer's
    // answering hello when it comes, so no sender waits for another
    // process's monitor (which may be stopped, or waiting on this one).
    p.awaitingHello = true;
    p.dialedAt = Clock::now();
    p.polling[kDialed] = true;
  }
  wake_.signal();  // the monitor reads it from now on
  return Status::ok();
}

bool ControlMesh::connected(int peer) const {
  if (peer < 0 || peer >= size() || peer == rank_) return false;
  const Peer& p = *peers_[static_cast<size_t>(peer)];
  std::lock_guard<std::mutex> lock(connMutex_);
  return p.polling[kDialed] || p.polling[kAccepted];
}

std::string ControlMesh::trouble() const {
  std::lock_guard<std::mutex> lock(connMutex_);
  std::string out = acceptTrouble_;
  const auto now = Clock::now();
  for (int q = 0; q < size(); ++q) {
    const auto& p = peers_[static_cast<size_t>(q)];
    if (!p || !p->awaitingHello || !p->polling[kDialed]) continue;
    const double waited = std::chrono::duration<double>(now - p->dialedAt).count();
    if (waited < 1.0) continue;
    char s[64];
    std::snprintf(s, sizeof(s), " %.0f s ago", waited);
    out += std::string(out.empty() ? "" : "; ") + "the control connection this rank opened to " +
           describe(q) + " at " + listenOf(q).toString() + s +
           " has had no answer (is that process stopped, or out of descriptors?)";
  }
  return out;
}

void ControlMesh::closeAbruptly() { stop(/*graceful=*/false); }

void ControlMesh::stop(bool graceful) {
  std::lock_guard<std::mutex> lock(stopMutex_);
  {
    std::lock_guard<std::mutex> conn(connMutex_);
    if (stopped_) return;
    stopped_ = true;  // no connection opens from now on
  }
  stopRequested_.store(true);
  wake_.signal();
  if (monitor_.joinable()) monitor_.join();
  pending_.clear();
  listener_.reset();
  for (auto& peer : peers_) {
    if (!peer) continue;
    std::lock_guard<std::mutex> wl(peer->writeMutex);
    for (int slot = 0; slot < kSlots; ++slot) {
      Socket& sock = peer->socks[slot];
      if (!sock.valid()) continue;
      if (graceful) {
        // Say so on every connection of the pair, so its end is no death;
        // then FIN after what was sent, dropping unread bytes, so close()
        // does not answer with a reset that could overtake a goodbye.
        (void)sendFrame(sock, wire::kLeaving, 0, nullptr, 0, Deadline::after(1.0));
        ::shutdown(sock.fd(), SHUT_WR);
        uint8_t sink[4096];
        size_t n = 0;
        while (sock.tryRecv(sink, sizeof(sink), &n).isOk() && n > 0) {
        }
      }
      std::lock_guard<std::mutex> conn(connMutex_);
      peer->polling[slot] = false;
      sock.reset();
    }
  }
}

}  // namespace lanes
