// MeshChannel: a communicator's tagged send/recv, allGather/barrier, failure
// spreading, progress and goodbye, over its channel of a ControlMesh.
#include "bootstrap/mesh_channel.h"

#include <algorithm>
#include <cstring>
#include <span>

#include "base/env.h"
#include "base/log.h"
#include "bootstrap/channel_tree.h"
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
  const std::vector<RankInfo> meshRanks = mesh->ranks();
  std::vector<RankInfo> ranks;
  for (size_t i = 0; i < members.size(); ++i) {
    RankInfo info = meshRanks[static_cast<size_t>(members[i])];
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

Status MeshChannel::gatherTable(const std::shared_ptr<ControlMesh>& mesh, const RankInfo& self,
                                Deadline deadline) {
  std::vector<int> everyone(static_cast<size_t>(mesh->size()));
  for (int r = 0; r < mesh->size(); ++r) everyone[static_cast<size_t>(r)] = r;
  std::unique_ptr<Bootstrap> table;
  // Opening a channel other than the root's gathers every member's RankInfo.
  LANES_RETURN_IF_ERROR(open(mesh, kTableChannel, std::move(everyone), self, deadline, &table));
  std::vector<SocketAddress> listens(static_cast<size_t>(mesh->size()));
  listens[static_cast<size_t>(mesh->rank())] = mesh->listenOf(mesh->rank());
  LANES_RETURN_IF_ERROR(table->allGather(listens.data(), sizeof(SocketAddress), deadline));
  mesh->completeTable(table->ranks(), listens);
  return Status::ok();
}

MeshChannel::~MeshChannel() { shutdown(); }

Status MeshChannel::withMeshTrouble(Status st) const {
  if (st.code() != lanesTimeout) return st;
  const std::string trouble = mesh_->trouble();
  if (trouble.empty()) return st;
  return Status(st.code(), st.message() + "; " + trouble);
}

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
  return withMeshTrouble(inbox_->mailbox().pop(peer, tag, data, deadline,
                                               "the message with tag " + std::to_string(tag)));
}

uint32_t MeshChannel::nextCollectiveTag(std::string* what, const char* op) {
  const uint32_t seq = collSeq_++;
  *what = std::string(op) + " #" + std::to_string(seq);
  return kReservedTagBase | (seq & ~kReservedTagBase);
}

namespace {

// Every message of a tree collective opens with one of these.
enum TreeMark : uint8_t { kTreeData = 0, kTreeFailed = 1 };

}  // namespace

// Up the tree, then down: each rank waits for its children's `up` messages,
// sends its own to its parent, and passes what its parent sends down to its
// children. A rank that cannot finish tells its parent (if it still owes it
// its message) and its children why, and they theirs: every rank fails
// within the tree's depth, naming the cause, and none waits for a deadline
// behind a dead rank.
Status MeshChannel::runTree(const char* op, const TreeUp& up, const TreeDown& down,
                            Deadline deadline) {
  std::string what;
  const uint32_t tag = nextCollectiveTag(&what, op);
  const int n = nranks();
  const int parent = treeParent(rank_);
  const std::vector<int> children = treeChildren(rank_, n);
  bool sentUp = false;
  // What a notice passes on: the first failure's own words, never rewrapped.
  std::string cause;
  auto giveUp = [&](const Status& st) {
    const std::string& reason = cause.empty() ? st.message() : cause;
    std::vector<uint8_t> notice(1, kTreeFailed);
    notice.insert(notice.end(), reason.begin(),
                  reason.begin() +
                      static_cast<std::ptrdiff_t>(std::min(reason.size(), wire::kMaxErrorBytes)));
    // The step may have failed at the deadline: the notices get time of their own.
    std::vector<int> tell = children;
    if (parent >= 0 && !sentUp) tell.push_back(parent);
    for (int p : tell)
      (void)sendTo(p, wire::kData, tag, notice.data(), notice.size(),
                   Deadline::after(kNoticeSeconds));
    return st;
  };
  // A message from `peer`, without its mark; a notice becomes the error.
  std::vector<uint8_t> got;
  auto receive = [&](int peer) -> Status {
    Status st = withMeshTrouble(inbox_->mailbox().pop(peer, tag, &got, deadline, what));
    if (!st) return Status(st.code(), what + ": " + st.message());
    if (got.empty()) return internalError(describe(peer) + " sent an empty " + what + " frame");
    if (got[0] == kTreeFailed) {
      cause.assign(got.begin() + 1, got.end());
      return remoteError(what + " cannot finish: " + cause + " (as " + describe(peer) +
                         " reports)");
    }
    got.erase(got.begin());
    return Status::ok();
  };
  auto sendData = [&](int peer, std::span<const uint8_t> data) -> Status {
    std::vector<uint8_t> frame(1, kTreeData);
    frame.insert(frame.end(), data.begin(), data.end());
    Status st = sendTo(peer, wire::kData, tag, frame.data(), frame.size(), deadline);
    if (!st) return Status(st.code(), what + ": " + st.message());
    return Status::ok();
  };

  for (int c : children) {
    Status st = receive(c);
    if (st) st = up.take(c, got);
    if (!st) return giveUp(st);
  }
  if (parent >= 0) {
    Status st = sendData(parent, up.give());
    if (!st) return giveUp(st);
    sentUp = true;
    st = receive(parent);
    if (st) st = down.take(got);
    if (!st) return giveUp(st);
  }
  for (int c : children) {
    Status st = sendData(c, down.give());
    if (!st) return giveUp(st);
  }
  return Status::ok();
}

// The blocks of a subtree travel up in the order of subtreeOf(); the whole
// table travels down.
Status MeshChannel::allGather(void* data, size_t bytes, Deadline deadline) {
  const int n = nranks();
  auto* all = static_cast<uint8_t*>(data);
  auto subtreeOf = [n](int root) {
    std::vector<int> out{root};
    for (size_t i = 0; i < out.size(); ++i)
      for (int c : treeChildren(out[i], n)) out.push_back(c);
    return out;
  };
  auto block = [&](int r) { return all + bytes * static_cast<size_t>(r); };
  std::vector<uint8_t> mine;  // this rank's subtree, for its parent
  TreeUp up;
  up.take = [&](int child, std::span<const uint8_t> got) -> Status {
    const std::vector<int> ranks = subtreeOf(child);
    if (got.size() != bytes * ranks.size())
      return invalidUsage(describe(child) + " sent " + std::to_string(got.size()) +
                          " bytes in a bootstrap allGather where rank " + std::to_string(rank_) +
                          " expected " + std::to_string(bytes * ranks.size()) +
                          ": the ranks called the bootstrap collectives differently");
    for (size_t i = 0; i < ranks.size() && bytes; ++i)
      std::memcpy(block(ranks[i]), got.data() + bytes * i, bytes);
    return Status::ok();
  };
  up.give = [&]() {
    mine.clear();
    for (int r : subtreeOf(rank_)) mine.insert(mine.end(), block(r), block(r) + bytes);
    return std::span<const uint8_t>(mine);
  };
  TreeDown down;
  down.take = [&](std::span<const uint8_t> got) -> Status {
    if (got.size() != bytes * static_cast<size_t>(n))
      return invalidUsage(describe(treeParent(rank_)) + " sent " + std::to_string(got.size()) +
                          " bytes down a bootstrap allGather where rank " + std::to_string(rank_) +
                          " expected " + std::to_string(bytes * static_cast<size_t>(n)) +
                          ": the ranks called the bootstrap collectives differently");
    // This rank's own block came up through it: the table holds it unchanged.
    if (bytes) std::memcpy(all, got.data(), got.size());
    return Status::ok();
  };
  down.give = [&]() { return std::span<const uint8_t>(all, bytes * static_cast<size_t>(n)); };
  return runTree("allGather", up, down, deadline);
}

Status MeshChannel::barrier(Deadline deadline) {
  auto none = [&](int from, std::span<const uint8_t> got) -> Status {
    if (got.empty()) return Status::ok();
    return invalidUsage(describe(from) +
                        " sent data in a bootstrap barrier: the ranks called the bootstrap "
                        "collectives differently");
  };
  TreeUp up;
  up.take = none;
  up.give = [] { return std::span<const uint8_t>(); };
  TreeDown down;
  down.take = [&](std::span<const uint8_t> got) { return none(treeParent(rank_), got); };
  down.give = [] { return std::span<const uint8_t>(); };
  return runTree("barrier", up, down, deadline);
}

void MeshChannel::setFailureHandler(FailureHandler handler) {
  inbox_->setFailureHandler(std::move(handler));
}

void MeshChannel::spreadFailure(int deadRank, const std::string& why) {
  if (deadRank < 0 || deadRank >= nranks()) return;
  const auto notice = wire::encodeFailureNotice(deadRank, why);
  // The members this rank does not reach itself get it passed on along the tree.
  (void)inbox_->firstToPass(wire::kFailure, deadRank);
  for (int p = 0; p < nranks(); ++p) {
    if (p == deadRank || !inbox_->notifiesDirectly(p)) continue;
    Status st =
        sendTo(p, wire::kFailure, 0, notice.data(), notice.size(), Deadline::after(kNoticeSeconds));
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
  std::vector<int> waiting, unconnected;
  for (int p : peers) {
    if (p < 0 || p >= nranks() || p == rank_) continue;
    if (!mesh_->connected(inbox_->meshRank(p)))
      unconnected.push_back(p);
    else if (sendTo(p, wire::kProgressQuery, id, nullptr, 0, deadline).isOk())
      waiting.push_back(p);
  }
  // Then the peers this rank has no connection to yet, each connect cut
  // short, so a host that does not answer leaves time for the others.
  for (int p : unconnected) {
    Deadline connect =
        std::min(Deadline::after(kStragglerSeconds), deadline,
                 [](const Deadline& a, const Deadline& b) { return a.at() < b.at(); });
    if (sendTo(p, wire::kProgressQuery, id, nullptr, 0, connect).isOk()) waiting.push_back(p);
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

Bootstrap::Join MeshChannel::childJoin(uint32_t channel, const std::vector<int>& members) {
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
  // The members this rank does not reach itself get it passed on along the
  // tree; the goodbye says which ones it told, who wait for this copy.
  std::vector<int> direct;
  std::string told(static_cast<size_t>(nranks()) / 8 + 1, '\0');
  for (int p = 0; p < nranks(); ++p)
    if (inbox_->notifiesDirectly(p)) {
      direct.push_back(p);
      told[static_cast<size_t>(p) / 8] = static_cast<char>(
          static_cast<uint8_t>(told[static_cast<size_t>(p) / 8]) | (1u << (p % 8)));
    }
  wire::Writer w;
  w.put<int32_t>(rank_);
  w.str(told);
  (void)inbox_->firstToPass(wire::kGoodbye, rank_);
  for (int p : direct)
    (void)sendTo(p, wire::kGoodbye, 0, w.data().data(), w.data().size(), Deadline::after(1.0));
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
