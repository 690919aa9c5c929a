#include "bootstrap/channel_inbox.h"

#include "base/log.h"
#include "bootstrap/channel_tree.h"
#include "bootstrap/wire.h"

namespace lanes {
namespace {

// How long passing a notice on may take per neighbour.
constexpr double kPassOnSeconds = 2.0;

std::vector<std::string> rankNames(const std::vector<RankInfo>& ranks) {
  std::vector<std::string> out;
  for (const auto& r : ranks) out.push_back(wire::describeRank(r));
  return out;
}

}  // namespace

ChannelInbox::ChannelInbox(ControlMesh* mesh, uint32_t channel, std::vector<int> members, int rank,
                           const std::vector<RankInfo>& ranks)
    : mesh_(mesh),
      channel_(channel),
      members_(std::move(members)),
      byMeshRank_(static_cast<size_t>(mesh->size()), -1),
      rank_(rank),
      names_(rankNames(ranks)),
      mailbox_(names_),
      replies_(names_),
      progress_(std::make_unique<std::atomic<int64_t>[]>(members_.size())),
      goodbyePassed_(members_.size(), false),
      failurePassed_(members_.size(), false) {
  for (size_t i = 0; i < members_.size(); ++i) {
    byMeshRank_[static_cast<size_t>(members_[i])] = static_cast<int>(i);
    progress_[i].store(-1);
  }
}

int ChannelInbox::channelRank(int meshRank) const {
  if (meshRank < 0 || meshRank >= static_cast<int>(byMeshRank_.size())) return -1;
  return byMeshRank_[static_cast<size_t>(meshRank)];
}

void ChannelInbox::handleFrame(ControlFrame& f) {
  const int p = channelRank(f.from);
  if (p < 0 || p == rank_) {
    LANES_WARN(Bootstrap, rank_,
               "rank %d of the control mesh sent on channel %u, which it is "
               "no member of; ignored",
               f.from, channel_);
    return;
  }
  switch (f.type) {
    case wire::kData:
      mailbox_.push(p, f.tag, std::move(f.payload));
      return;
    case wire::kProgress: {
      uint64_t seq = 0;
      wire::Reader r(f.payload);
      if (r.get(&seq)) progress_[static_cast<size_t>(p)].store(static_cast<int64_t>(seq));
      return;
    }
    case wire::kProgressQuery:
      answerProgressQuery(p, f.tag);
      return;
    case wire::kProgressReply:
      replies_.push(p, f.tag, std::move(f.payload));
      return;
    case wire::kGoodbye:
      handleGoodbye(p, f.payload);
      return;
    case wire::kFailure:
      handleFailureNotice(p, f.payload);
      return;
    default:
      LANES_WARN(Bootstrap, rank_, "%s sent a control frame of unknown type %u; ignored",
                 describe(p).c_str(), f.type);
  }
}

void ChannelInbox::handleFailureNotice(int p, const std::vector<uint8_t>& payload) {
  wire::Reader r(payload);
  int32_t dead = -1;
  std::string why;
  if (!r.get(&dead) || !r.str(&why, wire::kMaxErrorBytes) || dead < 0 ||
      dead >= static_cast<int>(members_.size())) {
    LANES_WARN(Bootstrap, rank_, "%s sent a malformed failure notice; ignored",
               describe(p).c_str());
    return;
  }
  // Passed on, a notice says whether the rank named sent it (it aborts).
  uint8_t aborting = dead == p ? 1 : 0;
  (void)r.get(&aborting);
  if (dead == rank_) {
    LANES_WARN(Bootstrap, rank_, "%s reports that this rank failed: %s", describe(p).c_str(),
               why.c_str());
  } else if (aborting) {
    peerFailed(dead, describe(dead) + " is aborting: " + why);
  } else {
    peerFailed(dead, describe(dead) + " failed, as " + describe(p) + " reports: " + why);
  }
  // Also from the rank named: it may be the only way to the members behind it.
  wire::Writer w;
  w.put<int32_t>(dead);
  w.str(why);
  w.put<uint8_t>(aborting);
  passOn(wire::kFailure, dead, w.data(), p);
}

void ChannelInbox::handleGoodbye(int p, const std::vector<uint8_t>& payload) {
  int32_t leaver = -1;
  std::string told;
  wire::Reader r(payload);
  if (!r.get(&leaver) || !r.str(&told, members_.size() / 8 + 1) || leaver < 0 ||
      leaver >= static_cast<int>(members_.size())) {
    LANES_WARN(Bootstrap, rank_, "%s sent a malformed goodbye; ignored", describe(p).c_str());
    return;
  }
  if (leaver == rank_) return;
  // A member the leaver told itself takes only that goodbye: it follows the
  // leaver's last frames on their connection, which one passed on by
  // another rank could overtake.
  const size_t bit = static_cast<size_t>(rank_);
  const bool toldDirectly =
      bit / 8 < told.size() && (static_cast<uint8_t>(told[bit / 8]) >> (bit % 8)) & 1;
  if ((leaver == p || !toldDirectly) && !mailbox_.isLeft(leaver)) {
    mailbox_.markLeft(leaver);
    LANES_INFO(Bootstrap, rank_, "%s left the communicator", describe(leaver).c_str());
  }
  passOn(wire::kGoodbye, leaver, payload, p);
}

bool ChannelInbox::notifiesDirectly(int peer) const {
  if (peer == rank_) return false;
  for (int q : treeNeighbours(rank_, static_cast<int>(members_.size())))
    if (q == peer) return true;
  return mesh_->connected(meshRank(peer));
}

bool ChannelInbox::firstToPass(uint16_t type, int subject) {
  std::lock_guard<std::mutex> lock(passMutex_);
  auto& passed = type == wire::kGoodbye ? goodbyePassed_ : failurePassed_;
  if (passed[static_cast<size_t>(subject)]) return false;
  passed[static_cast<size_t>(subject)] = true;
  return true;
}

void ChannelInbox::passOn(uint16_t type, int subject, const std::vector<uint8_t>& payload,
                          int from) {
  if (!firstToPass(type, subject)) return;
  for (int q : treeNeighbours(rank_, static_cast<int>(members_.size()))) {
    if (q == from || q == subject) continue;
    // Runs on the monitor thread: over open connections only, which the
    // channel's own rounds opened to its tree neighbours.
    Status st = mesh_->send(meshRank(q), channel_, type, 0, payload.data(), payload.size(),
                            Deadline::after(kPassOnSeconds), /*mayConnect=*/false);
    if (!st.isOk())
      LANES_TRACE(Bootstrap, rank_, "could not pass a notice about %s on to %s: %s",
                  describe(subject).c_str(), describe(q).c_str(), st.message().c_str());
  }
}

void ChannelInbox::connectionLost(int meshRank, const std::string& why) {
  const int p = channelRank(meshRank);
  if (p < 0 || p == rank_) return;
  if (mailbox_.isLeft(p)) {
    LANES_TRACE(Bootstrap, rank_, "%s closed its control connection after its goodbye",
                describe(p).c_str());
    return;
  }
  peerFailed(p, describe(p) + " " + why);
}

void ChannelInbox::markDead(int p, const std::string& why) {
  replies_.markDead(p, why);
  mailbox_.markDead(p, why);
}

void ChannelInbox::peerFailed(int p, const std::string& why) {
  replies_.markDead(p, why);               // a progress query waiting on it gives up
  if (!mailbox_.markDead(p, why)) return;  // already known
  LANES_WARN(Bootstrap, rank_, "%s", why.c_str());
  notifyFailure(p, why);
}

void ChannelInbox::notifyFailure(int p, const std::string& why) {
  Bootstrap::FailureHandler handler;
  {
    std::lock_guard<std::mutex> lock(handlerMutex_);
    if (!handler_) {
      unreported_.emplace_back(p, why);
      return;
    }
    handler = handler_;
  }
  handler(p, why);
}

void ChannelInbox::setFailureHandler(Bootstrap::FailureHandler handler) {
  std::vector<std::pair<int, std::string>> missed;
  {
    std::lock_guard<std::mutex> lock(handlerMutex_);
    handler_ = handler;
    missed.swap(unreported_);
  }
  // Deaths seen before a handler existed are reported now, once.
  for (const auto& [dead, why] : missed)
    if (handler) handler(dead, why);
}

void ChannelInbox::setProgressSource(Bootstrap::ProgressSource source) {
  std::lock_guard<std::mutex> lock(progressMutex_);
  progressSource_ = std::move(source);
}

// Runs on the monitor thread, which a stuck executor never blocks: that is
// what lets a rank answer while its own operation hangs.
void ChannelInbox::answerProgressQuery(int p, uint32_t queryId) {
  std::vector<uint8_t> answer;
  {
    std::lock_guard<std::mutex> lock(progressMutex_);
    if (progressSource_) answer = progressSource_();
  }
  if (answer.empty()) return;  // nothing to say yet: the asker reports "no answer"
  // A short wait: every rank queries every other at once after a timeout,
  // so the connection is often busy with this rank's own query for a moment.
  Status st = mesh_->send(meshRank(p), channel_, wire::kProgressReply, queryId, answer.data(),
                          answer.size(), Deadline::after(1.0));
  if (!st.isOk())
    LANES_TRACE(Bootstrap, rank_, "progress reply not delivered: %s", st.message().c_str());
}

}  // namespace lanes
