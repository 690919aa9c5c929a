// MeshChannel: a communicator's tagged send/recv, allGather/barrier, failure
// spreading, progress and goodbye, over its channel of a ControlMesh.
#include "bootstrap/mesh_channel.h"

#include <algorithm>
#include <cstring>
#include <span>

#include "base/env.h"
#include "base/log.h"
#include "bootstrap/wire.h"

namespace lanes {
namespace {

// Names the OS objects of a child communicator (shared-memory segments):
// distinct for every channel of a mesh, and across meshes.
uint64_t channelCommId(uint64_t meshCommId, uint32_t channel) {
  if (channel == kRootChannel) return meshCommId;
  uint64_t z = meshCommId + 0x9e3779b97f4a7c15ull * (uint64_t{channel} + 1);  // splitmix64
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

MeshChannel::MeshChannel(std::shared_ptr<ControlMesh> mesh, uint32_t channel,
                         std::vector<int> members, int rank, std::vector<RankInfo> ranks)
    : mesh_(std::move(mesh)),
      channel_(channel),
      rank_(rank),
      ranks_(std::move(ranks)),
      id_(mesh_->id()) {
  id_.commId = channelCommId(mesh_->id().commId, channel);
  inbox_ = std::make_shared<ChannelInbox>(mesh_.get(), channel, std::move(members), rank, ranks_);
}

Status MeshChannel::open(std::shared_ptr<ControlMesh> mesh, uint32_t channel,
                         std::vector<int> members, const RankInfo& self, Deadline deadline,
                         std::unique_ptr<Bootstrap>* out) {
  const auto at = std::find(members.begin(), members.end(), mesh->rank());
  if (at == members.end())
    return internalError("control channel " + std::to_string(channel) +
                         " does not include this process");
  const int rank = static_cast<int>(at - members.begin());
  // Who each member is, as far as the mesh knows; the swap below adds what
  // may differ since (the GPU).
  std::vector<RankInfo> ranks;
  for (size_t i = 0; i < members.size(); ++i) {
    RankInfo info = mesh->ranks()[static_cast<size_t>(members[i])];
    info.rank = static_cast<int>(i);
    ranks.push_back(info);
  }
  std::unique_ptr<MeshChannel> c(new MeshChannel(mesh, channel, std::move(members), rank, ranks));
  LANES_RETURN_IF_ERROR(mesh->attach(channel, c->inbox_));
  c->attached_ = true;
  if (channel != kRootChannel) {
    RankInfo mine = self;
    mine.rank = rank;
    std::vector<RankInfo> swapped(ranks.size());
    swapped[static_cast<size_t>(rank)] = mine;
    LANES_RETURN_IF_ERROR(c->allGather(swapped.data(), sizeof(RankInfo), deadline));
    c->ranks_ = std::move(swapped);
  }
  *out = std::move(c);
  return Status::ok();
}

MeshChannel::~MeshChannel() { shutdown(); }

std::string MeshChannel::describe(int rank) const {
  return wire::describeRank(ranks_[static_cast<size_t>(rank)]);
}

Status MeshChannel::sendTo(int peer, uint16_t type, uint32_t tag, const void* data, size_t bytes,
                           Deadline deadline) {
  if (shut_.load())
    return invalidUsage("rank " + std::to_string(rank_) + " already shut its bootstrap down");
  // Goodbyes and failure notices go to every peer whose socket is open, even
  // one reported dead or gone (a report may be wrong; a peer that left must
  // still get our goodbye or it takes our EOF for a crash).
  if (type != wire::kGoodbye && type != wire::kFailure)
    LANES_RETURN_IF_ERROR(inbox_->mailbox().peerStatus(peer));
  Status st = mesh_->send(inbox_->meshRank(peer), channel_, type, tag, data, bytes, deadline);
  if (!st.isOk())
    return Status(st.code(), "rank " + std::to_string(rank_) + " could not send to " +
                                 describe(peer) + ": " + st.message());
  return Status::ok();
}

Status MeshChannel::send(int peer, uint32_t tag, const void* data, size_t bytes) {
  if (peer < 0 || peer >= nranks())
    return invalidArgument("bootstrap send to rank " + std::to_string(peer) +
                           ", which is outside 0.." + std::to_string(nranks() - 1));
  if (tag >= kReservedTagBase)
    return invalidArgument("bootstrap tag " + std::to_string(tag) +
                           " is reserved for allGather/barrier; use tags below 2^31");
  if (bytes > wire::kMaxDataBytes)
    return invalidArgument("bootstrap messages are limited to " +
                           std::to_string(wire::kMaxDataBytes) + " bytes");
  if (peer == rank_) {
    const auto* b = static_cast<const uint8_t*>(data);
    inbox_->mailbox().push(peer, tag, std::vector<uint8_t>(b, b + bytes));
    return Status::ok();
  }
  return sendTo(peer, wire::kData, tag, data, bytes, Deadline::after(defaultTimeoutSeconds()));
}

Status MeshChannel::recv(int peer, uint32_t tag, std::vector<uint8_t>* data, Deadline deadline) {
  if (peer < 0 || peer >= nranks())
    return invalidArgument("bootstrap recv from rank " + std::to_string(peer) +
                           ", which is outside 0.." + std::to_string(nranks() - 1));
  return inbox_->mailbox().pop(peer, tag, data, deadline,
                               "the message with tag " + std::to_string(tag));
}

int MeshChannel::roundsFor(int n) {
  int rounds = 0;
  while ((1 << rounds) < n) ++rounds;
  return rounds;
}

uint32_t MeshChannel::nextCollectiveTag(std::string* what, const char* op) {
  const uint32_t seq = collSeq_++;
  *what = std::string(op) + " #" + std::to_string(seq);
  return kReservedTagBase | (seq & ~kReservedTagBase);
}

// Every message of a round-based collective opens with one of these.
enum RoundMark : uint8_t { kRoundData = 0, kRoundFailed = 1 };

// A rank that cannot finish a round tells the partners of its later rounds
// why, and they theirs: every rank whose result depends on a dead rank fails
// within log2 N hops, naming it, and none whose partners all delivered does
// (a rank may crash right after its last send).
Status MeshChannel::runRounds(const char* op, int rounds, const RoundPeer& to,
                              const RoundPeer& from, const RoundOut& outgoing,
                              const RoundIn& incoming, Deadline deadline) {
  std::string what;
  const uint32_t tag = nextCollectiveTag(&what, op);
  auto giveUp = [&](int firstRound, const std::string& reason) {
    std::vector<uint8_t> notice(1, kRoundFailed);
    notice.insert(notice.end(), reason.begin(),
                  reason.begin() +
                      static_cast<std::ptrdiff_t>(std::min(reason.size(), wire::kMaxErrorBytes)));
    // The round may have failed at the deadline: the notices get time of their own.
    for (int k = firstRound; k < rounds; ++k)
      (void)sendTo(to(k), wire::kData, tag, notice.data(), notice.size(),
                   Deadline::after(kNoticeSeconds));
  };
  std::vector<uint8_t> frame, got;
  for (int k = 0; k < rounds; ++k) {
    const std::span<const uint8_t> out = outgoing(k);
    frame.assign(1, kRoundData);
    frame.insert(frame.end(), out.begin(), out.end());
    Status st = sendTo(to(k), wire::kData, tag, frame.data(), frame.size(), deadline);
    if (!st) {
      giveUp(k + 1, st.message());
      return Status(st.code(), what + ": " + st.message());
    }
    const int peer = from(k);
    st = inbox_->mailbox().pop(peer, tag, &got, deadline, what);
    if (st && !got.empty() && got[0] == kRoundFailed) {
      const std::string reason(got.begin() + 1, got.end());
      giveUp(k + 1, reason);
      return remoteError(what + " cannot finish: " + reason + " (as " + describe(peer) +
                         " reports)");
    }
    if (st && got.empty()) st = internalError(describe(peer) + " sent an empty " + what + " frame");
    if (st) st = incoming(k, std::span<const uint8_t>(got).subspan(1));
    if (!st) {
      giveUp(k + 1, st.message());
      return st;
    }
  }
  return Status::ok();
}

// Bruck's all-gather: in round k this rank sends the blocks it holds (up to
// 2^k) to rank - 2^k and takes as many from rank + 2^k, so it is done after
// ceil(log2 N) rounds, and the channel carries N log N frames, not N^2.
Status MeshChannel::allGather(void* data, size_t bytes, Deadline deadline) {
  const int n = nranks();
  auto* all = static_cast<uint8_t*>(data);
  // held[j]: rank (rank_ + j) % n's block.
  std::vector<uint8_t> held(bytes * static_cast<size_t>(n));
  if (bytes) std::memcpy(held.data(), all + bytes * static_cast<size_t>(rank_), bytes);
  auto distance = [](int k) { return 1 << k; };
  auto blocks = [&](int k) {
    return bytes * static_cast<size_t>(std::min(distance(k), n - distance(k)));
  };
  Status st = runRounds(
      "allGather", roundsFor(n), [&](int k) { return (rank_ - distance(k) + n) % n; },
      [&](int k) { return (rank_ + distance(k)) % n; },
      [&](int k) { return std::span<const uint8_t>(held.data(), blocks(k)); },
      [&](int k, std::span<const uint8_t> got) -> Status {
        if (got.size() != blocks(k))
          return invalidUsage(describe((rank_ + distance(k)) % n) + " sent " +
                              std::to_string(got.size()) +
                              " bytes in a bootstrap allGather "
                              "where rank " +
                              std::to_string(rank_) + " expected " + std::to_string(blocks(k)) +
                              ": the ranks called the bootstrap collectives differently");
        if (!got.empty())
          std::memcpy(held.data() + bytes * static_cast<size_t>(distance(k)), got.data(),
                      got.size());
        return Status::ok();
      },
      deadline);
  LANES_RETURN_IF_ERROR(st);
  for (int j = 0; j < n && bytes; ++j)
    std::memcpy(all + bytes * static_cast<size_t>((rank_ + j) % n),
                held.data() + bytes * static_cast<size_t>(j), bytes);
  return Status::ok();
}

// Dissemination: in round k this rank tells rank + 2^k and hears from
// rank - 2^k; after ceil(log2 N) rounds every rank has heard, through some
// chain, from every other.
Status MeshChannel::barrier(Deadline deadline) {
  const int n = nranks();
  return runRounds(
      "barrier", roundsFor(n), [&](int k) { return (rank_ + (1 << k)) % n; },
      [&](int k) { return (rank_ - (1 << k) + n) % n; },
      [](int) { return std::span<const uint8_t>(); },
      [&](int k, std::span<const uint8_t> got) -> Status {
        if (got.empty()) return Status::ok();
        return invalidUsage(describe((rank_ - (1 << k) + n) % n) +
                            " sent data in a bootstrap barrier: the ranks called the "
                            "bootstrap collectives differently");
      },
      deadline);
}

void MeshChannel::setFailureHandler(FailureHandler handler) {
  inbox_->setFailureHandler(std::move(handler));
}

void MeshChannel::spreadFailure(int deadRank, const std::string& why) {
  if (deadRank < 0 || deadRank >= nranks()) return;
  wire::Writer w;
  w.put<int32_t>(deadRank);
  w.str(why.substr(0, wire::kMaxErrorBytes));
  for (int p = 0; p < nranks(); ++p) {
    if (p == rank_ || p == deadRank) continue;
    Status st =
        sendTo(p, wire::kFailure, 0, w.data().data(), w.data().size(), Deadline::after(2.0));
    if (!st.isOk())
      LANES_TRACE(Bootstrap, rank_, "failure notice not delivered: %s", st.message().c_str());
  }
  // The caller already knows: mark the rank dead here without calling the handler.
  if (deadRank != rank_) inbox_->markDead(deadRank, describe(deadRank) + " failed: " + why);
}

void MeshChannel::reportProgress(uint64_t completedSeq) {
  for (int p = 0; p < nranks(); ++p) {
    if (p == rank_) continue;
    (void)sendTo(p, wire::kProgress, 0, &completedSeq, sizeof(completedSeq),
                 Deadline::after(1.0));  // a hint: a peer that cannot take it is not waited for
  }
}

int64_t MeshChannel::peerProgress(int peer) const {
  if (peer < 0 || peer >= nranks()) return -1;
  return inbox_->progress(peer);
}

Status MeshChannel::peerStatus(int peer) const { return inbox_->mailbox().peerStatus(peer); }

void MeshChannel::setProgressSource(ProgressSource source) {
  inbox_->setProgressSource(std::move(source));
}

std::vector<std::vector<uint8_t>> MeshChannel::queryProgress(const std::vector<int>& peers,
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
    if (!inbox_->replies().popAny(waiting, id, &from, &answer, wait).isOk()) break;
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

Status MeshChannel::newChannel(uint32_t* channel) { return mesh_->newChannel(channel); }

Bootstrap::ChildJoin MeshChannel::childJoin(uint32_t channel, const std::vector<int>& members) {
  std::vector<int> meshRanks;
  for (int m : members) meshRanks.push_back(inbox_->meshRank(m));
  return [mesh = mesh_, channel, meshRanks](const RankInfo& self, Deadline deadline,
                                            std::unique_ptr<Bootstrap>* out) {
    return MeshChannel::open(mesh, channel, meshRanks, self, deadline, out);
  };
}

void MeshChannel::closeMailboxes() {
  const std::string why = "rank " + std::to_string(rank_) + " already shut its bootstrap down";
  inbox_->mailbox().close(why);
  inbox_->replies().close(why);
}

void MeshChannel::shutdown() {
  std::lock_guard<std::mutex> lock(shutdownMutex_);
  if (shut_.load()) return;
  if (!attached_) {  // the channel is another communicator's, or nobody's: leave it alone
    shut_.store(true);
    closeMailboxes();
    return;
  }
  for (int p = 0; p < nranks(); ++p)
    if (p != rank_) (void)sendTo(p, wire::kGoodbye, 0, nullptr, 0, Deadline::after(1.0));
  shut_.store(true);
  mesh_->detach(channel_);
  closeMailboxes();
}

void MeshChannel::closeAbruptlyForTest() {
  std::lock_guard<std::mutex> lock(shutdownMutex_);
  if (shut_.load()) return;
  shut_.store(true);
  mesh_->closeAbruptly();
  if (attached_) mesh_->detach(channel_);
  closeMailboxes();
}

}  // namespace lanes
