// Shared-memory transport between ranks of one host (processes, or threads
// of one process). Each direction of a peer pair is one POSIX segment holding
// one ByteRing per lane, made by the sender the first time it posts to that
// peer and mapped by the receiver the first time it looks for data: only the
// pairs a plan uses take /dev/shm (a ring's neighbours, a tree's parent and
// children), so N ranks running rings and trees hold O(N) segments, not
// O(N^2). The receiver removes the name once it has mapped the segment. A
// sender removes it at teardown after a failure; after a clean call it leaves
// it for a receiver that has not mapped it yet. A name whose creator died or
// left (no lock on it) is removed by the receiver's teardown, or by the next
// init on the host (stale_segments.h).
//
// A close reaches the peer through the rings both sides have mapped; where
// they have not, the communicator's failure notice (or the deadline) does.
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "transport/common/agree.h"
#include "transport/common/byte_ring.h"
#include "transport/shm/ring_budget.h"
#include "transport/shm/shm_segment.h"
#include "transport/shm/stale_segments.h"
#include "transport/transport.h"

namespace lanes {
namespace {

std::string segmentName(const std::string& tag, int src, int dst) {
  return "/" + tag + "-" + std::to_string(src) + "-" + std::to_string(dst);
}

Status closedError(int peer) {
  return remoteError("peer rank " + std::to_string(peer) + " closed the shared-memory connection");
}

Status closedHereError(int peer) {
  return remoteError("the shared-memory connection to rank " + std::to_string(peer) +
                     " was closed on this side (the communicator failed or was aborted)");
}

// A receiver looks for its peer's segment at most this often: shm_open on
// every poll would cost a system call per poll while a peer is late.
constexpr auto kOpenRetry = std::chrono::microseconds(20);

// What one rank's connections of one communicator share.
struct ShmSide {
  ShmSide(std::string tag, int rank, int lanes, size_t askedRing, size_t localRanks,
          size_t budgetBytes)
      : commTag(std::move(tag)),
        rank(rank),
        lanes(lanes),
        budget(askedRing, budgetBytes / localRanks),
        hostNeed(localRanks * segmentBytes(budget.peek(lanes, SIZE_MAX), lanes)) {}
  std::string commTag;
  int rank;
  int lanes;
  RingBudget budget;  // this rank's share of the host's budget
  // The least the host needs: every local rank's rings to one peer (a ring).
  size_t hostNeed;
};

class ShmConnection;

class ShmSendPort final : public SendPort {
 public:
  ShmSendPort(ShmConnection* conn, int lane) : conn_(conn), lane_(lane) {}
  Status post(const void* src, size_t bytes, size_t* taken) override;

 private:
  ShmConnection* conn_;
  int lane_;
};

class ShmRecvPort final : public RecvPort {
 public:
  ShmRecvPort(ShmConnection* conn, int lane) : conn_(conn), lane_(lane) {}
  Status peek(std::span<const std::byte>* view) override;
  void consume(size_t bytes) override;

 private:
  ShmConnection* conn_;
  int lane_;
};

class ShmConnection final : public Connection {
 public:
  ShmConnection(std::shared_ptr<ShmSide> side, int peer) : side_(std::move(side)), peer_(peer) {
    const auto lanes = static_cast<size_t>(side_->lanes);
    outRings_.resize(lanes);
    inRings_.resize(lanes);
    for (int l = 0; l < side_->lanes; ++l) {
      sendPorts_.emplace_back(this, l);
      recvPorts_.emplace_back(this, l);
    }
  }
  // The peer sees the rings closed, not a silent stall. A teardown that no
  // failure preceded may leave bytes the receiver, still in the same call,
  // has not mapped yet: the name stays for it (it removes the name when it
  // maps; one that never comes leaves an unlocked name for the next init's
  // sweep, stale_segments.h).
  ~ShmConnection() override {
    std::unique_lock<std::mutex> lock(mutex_);
    bool unread = false;
    if (!closed_ && outReady_.load(std::memory_order_relaxed))
      for (const ByteRing& r : outRings_) unread = unread || r.unread() > 0;
    if (unread) out_.keepName();
    lock.unlock();
    close();
  }

  int peer() const override { return peer_; }
  const char* transportName() const override { return "shm"; }
  int lanes() const override { return side_->lanes; }
  SendPort& sendPort(int lane) override { return sendPorts_.at(static_cast<size_t>(lane)); }
  RecvPort& recvPort(int lane) override { return recvPorts_.at(static_cast<size_t>(lane)); }
  // Posted bytes are in the shared ring, which the peer keeps mapped.
  bool drain(Deadline) override { return true; }
  void close() override {
    std::lock_guard<std::mutex> lock(mutex_);
    // A segment the peer made that this side never mapped is mapped now, so
    // the peer's posts into it fail too (and its name goes).
    if (!closed_ && !inReady_.load(std::memory_order_relaxed) && inFailure_) {
      (void)openIncoming();
      // A peer that died while building them left its rings under their
      // build name, which no one else would ever look for.
      (void)removeIfStale(segmentName(side_->commTag, peer_, side_->rank).substr(1) + ".new");
    }
    closed_ = true;
    if (outReady_.load(std::memory_order_relaxed))
      for (ByteRing& r : outRings_) r.close();
    if (inReady_.load(std::memory_order_relaxed))
      for (ByteRing& r : inRings_) r.close();
  }

  // The outgoing ring of `lane`, made on the first call.
  Status outgoing(int lane, ByteRing** ring) {
    if (!outReady_.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!outReady_.load(std::memory_order_relaxed)) LANES_RETURN_IF_ERROR(createOutgoing());
    }
    *ring = &outRings_[static_cast<size_t>(lane)];
    return Status::ok();
  }
  // The incoming ring of `lane`, or nullptr while the peer has not made it.
  Status incoming(int lane, ByteRing** ring) {
    *ring = nullptr;
    if (!inReady_.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!inReady_.load(std::memory_order_relaxed)) {
        const auto now = std::chrono::steady_clock::now();
        if (!closed_ && now < nextOpen_) return Status::ok();
        LANES_RETURN_IF_ERROR(openIncoming());
        if (!inReady_.load(std::memory_order_relaxed)) {
          nextOpen_ = now + kOpenRetry;
          return Status::ok();
        }
      }
    }
    *ring = &inRings_[static_cast<size_t>(lane)];
    return Status::ok();
  }

 private:
  // Both under mutex_; a failure is kept and returned by every later call.
  Status createOutgoing();
  Status openIncoming();

  std::shared_ptr<ShmSide> side_;
  int peer_;
  std::mutex mutex_;
  bool closed_ = false;
  std::chrono::steady_clock::time_point nextOpen_{};
  Status outFailure_;
  Status inFailure_;
  ShmSegment out_;
  ShmSegment in_;
  std::vector<ByteRing> outRings_;
  std::vector<ByteRing> inRings_;
  std::atomic<bool> outReady_{false};
  std::atomic<bool> inReady_{false};
  std::vector<ShmSendPort> sendPorts_;
  std::vector<ShmRecvPort> recvPorts_;
};

Status ShmConnection::createOutgoing() {
  if (closed_) return closedHereError(peer_);
  if (!outFailure_) return outFailure_;
  const int lanes = side_->lanes;
  const size_t capacity = side_->budget.take(lanes, devShmFreeBytes());
  const size_t stride = ringStride(capacity);
  const auto initialise = [&](void* base, size_t) {
    for (int l = 0; l < lanes; ++l)
      ByteRing(static_cast<std::byte*>(base) + static_cast<size_t>(l) * stride,
               ByteRing::bytesFor(capacity), true);
  };
  Status st =
      ShmSegment::create(segmentName(side_->commTag, side_->rank, peer_),
                         segmentBytes(capacity, lanes), side_->hostNeed, &out_, {}, initialise);
  if (!st) {
    outFailure_ =
        Status(st.code(), "rank " + std::to_string(side_->rank) + ": shared-memory rings to rank " +
                              std::to_string(peer_) + ": " + st.message());
    return outFailure_;
  }
  out_.mapAllPages();
  auto* base = static_cast<std::byte*>(out_.data());
  for (int l = 0; l < lanes; ++l)
    outRings_[static_cast<size_t>(l)] =
        ByteRing(base + static_cast<size_t>(l) * stride, ByteRing::bytesFor(capacity), false);
  outReady_.store(true, std::memory_order_release);
  LANES_TRACE(Transport, side_->rank, "shm: rings to rank %d made, %d lanes of %zu bytes", peer_,
              lanes, capacity);
  return Status::ok();
}

Status ShmConnection::openIncoming() {
  if (closed_) return closedHereError(peer_);
  if (!inFailure_) return inFailure_;
  const std::string name = segmentName(side_->commTag, peer_, side_->rank);
  bool present = false;
  ShmSegment seg;
  Status st = ShmSegment::openIfPresent(name, &seg, &present);
  if (st && !present) return Status::ok();
  // The sender chose the ring size; every lane must agree with it and the
  // segment's size, or the ranks were started with different LANES_NLANES.
  const int lanes = side_->lanes;
  size_t capacity = 0;
  if (st) {
    capacity = seg.size() >= sizeof(ByteRingHeader)
                   ? static_cast<const ByteRingHeader*>(seg.data())->capacity
                   : 0;
    bool same =
        capacity > 0 && capacity % kRingGranule == 0 && seg.size() == segmentBytes(capacity, lanes);
    for (int l = 0; same && l < lanes; ++l) {
      const auto* h =
          reinterpret_cast<const ByteRingHeader*>(static_cast<const std::byte*>(seg.data()) +
                                                  static_cast<size_t>(l) * ringStride(capacity));
      same = h->magic == ByteRing::kMagic && h->capacity == capacity;
    }
    if (!same)
      st = systemError("shared-memory segment " + name + " from rank " + std::to_string(peer_) +
                       " does not hold " + std::to_string(lanes) +
                       " rings; LANES_NLANES must be the same on every rank");
  }
  if (!st) {
    inFailure_ = Status(st.code(), "rank " + std::to_string(side_->rank) + ": " + st.message());
    return inFailure_;
  }
  // Both ends hold the mapping now: the name can go.
  seg.removeName();
  in_ = std::move(seg);
  in_.mapAllPages();

  auto* base = static_cast<std::byte*>(in_.data());
  for (int l = 0; l < lanes; ++l)
    inRings_[static_cast<size_t>(l)] = ByteRing(
        base + static_cast<size_t>(l) * ringStride(capacity), ByteRing::bytesFor(capacity), false);
  inReady_.store(true, std::memory_order_release);
  return Status::ok();
}

Status ShmSendPort::post(const void* src, size_t bytes, size_t* taken) {
  *taken = 0;
  ByteRing* ring = nullptr;
  LANES_RETURN_IF_ERROR(conn_->outgoing(lane_, &ring));
  if (ring->closed()) return closedError(conn_->peer());
  *taken = ring->write(src, bytes);
  return Status::ok();
}

Status ShmRecvPort::peek(std::span<const std::byte>* view) {
  *view = {};
  ByteRing* ring = nullptr;
  LANES_RETURN_IF_ERROR(conn_->incoming(lane_, &ring));
  if (ring == nullptr) return Status::ok();
  // closed is read before the data, so bytes written before a close are
  // still delivered.
  const bool closed = ring->closed();
  *view = ring->readable();
  if (view->empty() && closed) return closedError(conn_->peer());
  return Status::ok();
}

void ShmRecvPort::consume(size_t bytes) {
  ByteRing* ring = nullptr;
  // Only after a peek that returned bytes, so the ring exists.
  if (conn_->incoming(lane_, &ring) && ring != nullptr) ring->consume(bytes);
}

class ShmTransport final : public Transport {
 public:
  const char* name() const override { return "shm"; }
  bool canConnect(const RankInfo& self, const RankInfo& peer) const override {
    return self.hostHash == peer.hostHash;
  }
  Status connect(const TransportContext& ctx, const std::vector<int>& peers,
                 std::vector<std::unique_ptr<Connection>>* out) override;
};

Status ShmTransport::connect(const TransportContext& ctx, const std::vector<int>& peers,
                             std::vector<std::unique_ptr<Connection>>* out) {
  if (ctx.bootstrap == nullptr || ctx.lanes <= 0) {
    return invalidArgument("shm transport: connect needs a bootstrap and at least one lane");
  }
  Deadline deadline = Deadline::after(ctx.timeoutSeconds);
  size_t localRanks = 1;
  if (ctx.ranks != nullptr) {
    localRanks = 0;
    for (const RankInfo& r : *ctx.ranks) {
      if (r.hostHash == (*ctx.ranks)[static_cast<size_t>(ctx.rank)].hostHash) ++localRanks;
    }
  }
  const size_t askedRing = padToGranule(ctx.config.shmRingBytes);
  auto side = std::make_shared<ShmSide>(ctx.commTag, ctx.rank, ctx.lanes, askedRing, localRanks,
                                        ctx.config.shmBudgetBytes);
  // A restart reuses the communicator id, so its names: one the earlier
  // run's sender left for this rank (unlocked, as its creator is gone) would
  // be taken for this run's. Removed before the agreement, after which
  // this run's senders may post.
  for (int peer : peers) {
    const std::string name = segmentName(ctx.commTag, peer, ctx.rank).substr(1);
    (void)removeIfStale(name);
    (void)removeIfStale(name + ".new");
  }
  // A /dev/shm too small for any plan fails the init, on every rank, rather
  // than the first call.
  Status local;
  const size_t freeBytes = devShmFreeBytes();
  if (!peers.empty() && freeBytes < side->hostNeed)
    local = Status(lanesSystemError, "rank " + std::to_string(ctx.rank) + ": " +
                                         devShmNoSpace(freeBytes, side->hostNeed).message());
  LANES_RETURN_IF_ERROR(
      agreeOnStatus(*ctx.bootstrap, local, "find room for its shared-memory rings", deadline));

  out->clear();
  for (int peer : peers) out->push_back(std::make_unique<ShmConnection>(side, peer));
  LANES_INFO(Transport, ctx.rank,
             "shm: connected %zu peers (rings made on first use: %d lanes, up to %zu bytes each, "
             "%zu MiB for this rank's rings)",
             peers.size(), ctx.lanes, askedRing, (ctx.config.shmBudgetBytes / localRanks) >> 20);
  return Status::ok();
}

}  // namespace

std::unique_ptr<Transport> makeShmTransport() { return std::make_unique<ShmTransport>(); }

}  // namespace lanes
