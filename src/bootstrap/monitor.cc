// The monitor thread of a MeshBootstrap: reads every peer's control
// connection, files data into the mailbox, and turns a closed connection or
// a failure notice into "rank X is dead" for the failure handler.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/log.h"
#include "bootstrap/mesh_bootstrap.h"
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

void MeshBootstrap::monitorLoop() {
  std::vector<pollfd> fds;
  std::vector<int> who;
  while (!stopRequested_.load()) {
    fds.assign(1, pollfd{wake_.fd(), POLLIN, 0});
    who.assign(1, -1);
    for (int p = 0; p < nranks(); ++p) {
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

void MeshBootstrap::readPeer(int p) {
  Peer& peer = *peers_[static_cast<size_t>(p)];
  for (;;) {
    bool complete = false;
    Status st = peer.reader.readSome(peer.sock, wire::kMaxDataBytes, &complete);
    if (!st.isOk()) {
      peer.polling = false;
      if (mailbox_.isLeft(p)) {
        LANES_TRACE(Bootstrap, rank_, "%s closed its control connection after its goodbye",
                    describe(p).c_str());
      } else if (st.code() == lanesRemoteError) {
        peerFailed(
            p, describe(p) + " closed its control connection: the process exited or was killed");
      } else {
        peerFailed(p, describe(p) + " sent a corrupt control frame (" + st.message() +
                          "); this rank stopped listening to it");
      }
      return;
    }
    if (!complete) return;
    const FrameHeader h = peer.reader.header();
    handleFrame(p, h.type, h.tag, peer.reader.payload());
    peer.reader.reset();
  }
}

void MeshBootstrap::handleFrame(int p, uint16_t type, uint32_t tag, std::vector<uint8_t>& payload) {
  switch (type) {
    case wire::kData:
      mailbox_.push(p, tag, std::move(payload));
      return;
    case wire::kProgress: {
      uint64_t seq = 0;
      wire::Reader r(payload);
      if (r.get(&seq)) progress_[static_cast<size_t>(p)].store(static_cast<int64_t>(seq));
      return;
    }
    case wire::kProgressQuery:
      answerProgressQuery(p, tag);
      return;
    case wire::kProgressReply:
      replies_.push(p, tag, std::move(payload));
      return;
    case wire::kGoodbye:
      mailbox_.markLeft(p);
      LANES_INFO(Bootstrap, rank_, "%s left the communicator", describe(p).c_str());
      return;
    case wire::kFailure: {
      wire::Reader r(payload);
      int32_t dead = -1;
      std::string why;
      if (!r.get(&dead) || !r.str(&why, wire::kMaxErrorBytes) || dead < 0 || dead >= nranks()) {
        LANES_WARN(Bootstrap, rank_, "%s sent a malformed failure notice; ignored",
                   describe(p).c_str());
        return;
      }
      if (dead == rank_) {
        LANES_WARN(Bootstrap, rank_, "%s reports that this rank failed: %s", describe(p).c_str(),
                   why.c_str());
      } else if (dead == p) {
        peerFailed(p, describe(p) + " is aborting: " + why);
      } else {
        peerFailed(dead, describe(dead) + " failed, as " + describe(p) + " reports: " + why);
      }
      return;
    }
    default:
      LANES_WARN(Bootstrap, rank_, "%s sent a control frame of unknown type %u; ignored",
                 describe(p).c_str(), type);
  }
}

void MeshBootstrap::peerFailed(int deadRank, const std::string& why) {
  replies_.markDead(deadRank, why);               // a progress query waiting on it gives up
  if (!mailbox_.markDead(deadRank, why)) return;  // already known
  LANES_WARN(Bootstrap, rank_, "%s", why.c_str());
  notifyFailure(deadRank, why);
}

void MeshBootstrap::notifyFailure(int deadRank, const std::string& why) {
  FailureHandler handler;
  {
    std::lock_guard<std::mutex> lock(handlerMutex_);
    if (!handler_) {
      unreported_.emplace_back(deadRank, why);
      return;
    }
    handler = handler_;
  }
  handler(deadRank, why);
}

void MeshBootstrap::setProgressSource(ProgressSource source) {
  std::lock_guard<std::mutex> lock(progressMutex_);
  progressSource_ = std::move(source);
}

// Runs on the monitor thread, which a stuck executor never blocks: that is
// what lets a rank answer while its own operation hangs.
void MeshBootstrap::answerProgressQuery(int p, uint32_t queryId) {
  std::vector<uint8_t> answer;
  {
    std::lock_guard<std::mutex> lock(progressMutex_);
    if (progressSource_) answer = progressSource_();
  }
  if (answer.empty()) return;  // nothing to say yet: the asker reports "no answer"
  Status st =
      sendTo(p, wire::kProgressReply, queryId, answer.data(), answer.size(), Deadline::after(1.0));
  if (!st.isOk())
    LANES_TRACE(Bootstrap, rank_, "progress reply not delivered: %s", st.message().c_str());
}

std::vector<std::vector<uint8_t>> MeshBootstrap::queryProgress(const std::vector<int>& peers,
                                                               Deadline deadline) {
  std::vector<std::vector<uint8_t>> out(peers.size());
  const uint32_t id = querySeq_.fetch_add(1);
  std::vector<int> waiting;
  for (int p : peers) {
    if (p < 0 || p >= nranks() || p == rank_) continue;
    if (sendTo(p, wire::kProgressQuery, id, nullptr, 0, deadline).isOk()) waiting.push_back(p);
  }
  Deadline wait = deadline;
  while (!waiting.empty()) {
    int from = -1;
    std::vector<uint8_t> answer;
    // A failed pop (deadline, every peer gone) leaves the rest empty; the caller says so.
    if (!replies_.popAny(waiting, id, &from, &answer, wait).isOk()) break;
    for (size_t i = 0; i < peers.size(); ++i)
      if (peers[i] == from) out[i] = answer;
    waiting.erase(std::find(waiting.begin(), waiting.end(), from));
    // Monitor threads answer within milliseconds: once one has, a peer
    // silent for kStragglerSeconds more is stalled, and waiting out the
    // whole deadline for it would only delay the diagnosis.
    Deadline grace = Deadline::after(kStragglerSeconds);
    wait = grace.at() < deadline.at() ? grace : deadline;
  }
  return out;
}

}  // namespace lanes
