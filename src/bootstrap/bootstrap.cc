// Bootstrap::create and the MeshBootstrap operations callers use: tagged
// send/recv, allGather/barrier, failure spreading, progress, shutdown.
#include "bootstrap/bootstrap.h"

#include <cstdio>
#include <cstring>

#include "base/env.h"
#include "base/log.h"
#include "bootstrap/mesh_bootstrap.h"
#include "bootstrap/rendezvous.h"
#include "bootstrap/wire.h"

namespace lanes {
namespace {

std::vector<std::string> rankNames(const std::vector<RankInfo>& ranks) {
  std::vector<std::string> out;
  for (const auto& r : ranks) out.push_back(wire::describeRank(r));
  return out;
}

// A bootstrap wait that expired names the variable that sets it: the result
// is lanesTimeout, whose generic text names LANES_TIMEOUT, the wrong knob
// here. (The root's own message names it already.)
Status nameBootstrapExpiry(Status st, double seconds) {
  if (st.code() != lanesTimeout ||
      st.message().find("LANES_BOOTSTRAP_TIMEOUT") != std::string::npos)
    return st;
  char waited[32];
  std::snprintf(waited, sizeof(waited), "%.0f", seconds);
  return timeoutError(st.message() + "; the bootstrap gave up after " + waited +
                      " s (LANES_BOOTSTRAP_TIMEOUT)");
}

}  // namespace

Status Bootstrap::create(const UniqueIdData& id, int nranks, const RankInfo& self,
                         Deadline deadline, std::unique_ptr<Bootstrap>* out) {
  if (nranks < 1)
    return invalidArgument("nranks is " + std::to_string(nranks) +
                           "; a communicator needs at "
                           "least one rank");
  if (self.rank < 0 || self.rank >= nranks)
    return invalidArgument("rank " + std::to_string(self.rank) + " is outside 0.." +
                           std::to_string(nranks - 1) + " for a communicator of " +
                           std::to_string(nranks) + " ranks");
  const double budget = deadline.remainingMs() / 1000.0;
  Socket listener;
  std::vector<RankInfo> ranks;
  std::vector<SocketAddress> listens;
  Status st = joinRoot(id, nranks, self, deadline, &listener, &ranks, &listens);
  if (!st.isOk()) return nameBootstrapExpiry(st, budget);
  std::vector<Socket> peers;
  st = buildMesh(id, self.rank, ranks, listens, listener, deadline, &peers);
  if (!st.isOk()) return nameBootstrapExpiry(st, budget);
  auto b = std::make_unique<MeshBootstrap>(id, self.rank, std::move(ranks), std::move(peers));
  LANES_RETURN_IF_ERROR(b->start());
  LANES_INFO(Bootstrap, self.rank, "control mesh of %d ranks is up", nranks);
  *out = std::move(b);
  return Status::ok();
}

MeshBootstrap::MeshBootstrap(const UniqueIdData& id, int rank, std::vector<RankInfo> ranks,
                             std::vector<Socket> peers)
    : id_(id),
      rank_(rank),
      ranks_(std::move(ranks)),
      mailbox_(rankNames(ranks_)),
      progress_(std::make_unique<std::atomic<int64_t>[]>(ranks_.size())),
      replies_(rankNames(ranks_)) {
  for (size_t i = 0; i < ranks_.size(); ++i) {
    progress_[i].store(-1);
    peers_.emplace_back();
    if (static_cast<int>(i) == rank_) continue;
    peers_.back() = std::make_unique<Peer>();
    peers_.back()->sock = std::move(peers[i]);
    peers_.back()->polling = true;
  }
}

MeshBootstrap::~MeshBootstrap() {
  shutdown();
  // shutdown() called from inside the failure handler leaves the join to us.
  if (monitor_.joinable()) {
    wake_.signal();
    monitor_.join();
  }
}

Status MeshBootstrap::start() {
  if (wake_.fd() < 0)
    return systemError("eventfd for the bootstrap monitor failed: " + errnoText(errno));
  monitor_ = std::thread([this] { monitorLoop(); });
  return Status::ok();
}

std::string MeshBootstrap::describe(int rank) const {
  return wire::describeRank(ranks_[static_cast<size_t>(rank)]);
}

Status MeshBootstrap::sendTo(int peer, uint16_t type, uint32_t tag, const void* data, size_t bytes,
                             Deadline deadline) {
  // Goodbyes and failure notices go to every peer whose socket is open, even
  // one reported dead or gone (a report may be wrong; a peer that left must
  // still get our goodbye or it takes our EOF for a crash).
  if (type != wire::kGoodbye && type != wire::kFailure)
    LANES_RETURN_IF_ERROR(mailbox_.peerStatus(peer));
  Peer& p = *peers_[static_cast<size_t>(peer)];
  std::lock_guard<std::mutex> lock(p.writeMutex);
  if (!p.sock.valid())
    return invalidUsage("rank " + std::to_string(rank_) + " already shut its bootstrap down");
  Status st = sendFrame(p.sock, type, tag, data, bytes, deadline);
  if (!st.isOk())
    return Status(st.code(), "rank " + std::to_string(rank_) + " could not send to " +
                                 describe(peer) + ": " + st.message());
  return Status::ok();
}

Status MeshBootstrap::send(int peer, uint32_t tag, const void* data, size_t bytes) {
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
    mailbox_.push(peer, tag, std::vector<uint8_t>(b, b + bytes));
    return Status::ok();
  }
  return sendTo(peer, wire::kData, tag, data, bytes, Deadline::after(defaultTimeoutSeconds()));
}

Status MeshBootstrap::recv(int peer, uint32_t tag, std::vector<uint8_t>* data, Deadline deadline) {
  if (peer < 0 || peer >= nranks())
    return invalidArgument("bootstrap recv from rank " + std::to_string(peer) +
                           ", which is outside 0.." + std::to_string(nranks() - 1));
  return mailbox_.pop(peer, tag, data, deadline, "the message with tag " + std::to_string(tag));
}

Status MeshBootstrap::exchange(const void* mine, size_t bytes, void* all, Deadline deadline,
                               const char* op) {
  const uint32_t seq = collSeq_++;
  const uint32_t tag = kReservedTagBase | (seq & ~kReservedTagBase);
  const std::string what = std::string(op) + " #" + std::to_string(seq);
  for (int p = 0; p < nranks(); ++p) {
    if (p == rank_) continue;
    Status st = sendTo(p, wire::kData, tag, mine, bytes, deadline);
    if (!st.isOk()) return Status(st.code(), what + ": " + st.message());
  }
  std::vector<uint8_t> got;
  for (int p = 0; p < nranks(); ++p) {
    if (p == rank_) continue;
    LANES_RETURN_IF_ERROR(mailbox_.pop(p, tag, &got, deadline, what + " data"));
    if (got.size() != bytes)
      return invalidUsage(describe(p) + " contributed " + std::to_string(got.size()) +
                          " bytes to " + what + " but rank " + std::to_string(rank_) +
                          " contributed " + std::to_string(bytes) +
                          ": the ranks called the bootstrap collectives differently");
    if (all && bytes)
      std::memcpy(static_cast<uint8_t*>(all) + bytes * static_cast<size_t>(p), got.data(), bytes);
  }
  return Status::ok();
}

Status MeshBootstrap::allGather(void* data, size_t bytes, Deadline deadline) {
  auto* base = static_cast<uint8_t*>(data);
  return exchange(base + bytes * static_cast<size_t>(rank_), bytes, base, deadline, "allGather");
}

Status MeshBootstrap::barrier(Deadline deadline) {
  return exchange(nullptr, 0, nullptr, deadline, "barrier");
}

void MeshBootstrap::setFailureHandler(FailureHandler handler) {
  std::vector<std::pair<int, std::string>> missed;
  {
    std::lock_guard<std::mutex> lock(handlerMutex_);
    handler_ = handler;
    missed.swap(unreported_);
  }
  // Deaths seen before a handler existed are reported now, once.
  for (const auto& [deadRank, why] : missed)
    if (handler) handler(deadRank, why);
}

void MeshBootstrap::spreadFailure(int deadRank, const std::string& why) {
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
  if (deadRank != rank_) mailbox_.markDead(deadRank, describe(deadRank) + " failed: " + why);
}

void MeshBootstrap::reportProgress(uint64_t completedSeq) {
  for (int p = 0; p < nranks(); ++p) {
    if (p == rank_) continue;
    (void)sendTo(p, wire::kProgress, 0, &completedSeq, sizeof(completedSeq),
                 Deadline::after(1.0));  // a hint: a peer that cannot take it is not waited for
  }
}

int64_t MeshBootstrap::peerProgress(int peer) const {
  if (peer < 0 || peer >= nranks()) return -1;
  return progress_[static_cast<size_t>(peer)].load();
}

void MeshBootstrap::shutdown() { stop(/*goodbye=*/true); }

void MeshBootstrap::closeAbruptlyForTest() { stop(/*goodbye=*/false); }

void MeshBootstrap::stop(bool goodbye) {
  std::lock_guard<std::mutex> lock(shutdownMutex_);
  if (shut_) return;
  if (goodbye && !goodbyeSent_)
    for (int p = 0; p < nranks(); ++p)
      if (p != rank_) (void)sendTo(p, wire::kGoodbye, 0, nullptr, 0, Deadline::after(1.0));
  goodbyeSent_ = goodbyeSent_ || goodbye;
  stopRequested_.store(true);
  if (std::this_thread::get_id() == monitor_.get_id()) return;  // from the failure handler
  shut_ = true;
  wake_.signal();
  if (monitor_.joinable()) monitor_.join();
  for (auto& peer : peers_) {
    if (!peer) continue;
    std::lock_guard<std::mutex> wl(peer->writeMutex);
    if (!peer->sock.valid()) continue;
    if (goodbye) {
      // Send FIN after the goodbye and drop unread bytes, so close() does not
      // answer with a reset that could overtake the goodbye.
      ::shutdown(peer->sock.fd(), SHUT_WR);
      uint8_t sink[4096];
      size_t n = 0;
      while (peer->sock.tryRecv(sink, sizeof(sink), &n).isOk() && n > 0) {
      }
    }
    peer->sock.reset();
  }
  mailbox_.close("rank " + std::to_string(rank_) + " already shut its bootstrap down");
  replies_.close("rank " + std::to_string(rank_) + " already shut its bootstrap down");
}

}  // namespace lanes
