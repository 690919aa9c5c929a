// Shared-memory transport between ranks of one host (processes, or threads
// of one process). Each direction of a peer pair is one POSIX segment,
// created by the sender and holding one ByteRing per lane; the name is
// unlinked as soon as the receiver has mapped it, so nothing is left in
// /dev/shm even if a rank is SIGKILLed later.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "transport/common/agree.h"
#include "transport/common/byte_ring.h"
#include "transport/shm/shm_segment.h"
#include "transport/transport.h"

namespace lanes {
namespace {

// Rings of one segment, each starting on its own cache line.
size_t ringStride(size_t capacity) { return (ByteRing::bytesFor(capacity) + 63) & ~size_t{63}; }

std::string segmentName(const std::string& tag, int src, int dst) {
  return "/" + tag + "-" + std::to_string(src) + "-" + std::to_string(dst);
}

Status closedError(int peer) {
  return remoteError("peer rank " + std::to_string(peer) + " closed the shared-memory connection");
}

class ShmSendPort final : public SendPort {
 public:
  ShmSendPort(ByteRing ring, int peer) : ring_(ring), peer_(peer) {}
  Status post(const void* src, size_t bytes, size_t* taken) override {
    *taken = 0;
    if (ring_.closed()) return closedError(peer_);
    *taken = ring_.write(src, bytes);
    return Status::ok();
  }
  void close() { ring_.close(); }

 private:
  ByteRing ring_;
  int peer_;
};

class ShmRecvPort final : public RecvPort {
 public:
  ShmRecvPort(ByteRing ring, int peer) : ring_(ring), peer_(peer) {}
  Status peek(std::span<const std::byte>* view) override {
    // closed is read before the data, so bytes written before a close are
    // still delivered.
    bool closed = ring_.closed();
    *view = ring_.readable();
    if (view->empty() && closed) return closedError(peer_);
    return Status::ok();
  }
  void consume(size_t bytes) override { ring_.consume(bytes); }
  void close() { ring_.close(); }

 private:
  ByteRing ring_;
  int peer_;
};

class ShmConnection final : public Connection {
 public:
  ShmConnection(int peer, int lanes, size_t capacity, ShmSegment out, ShmSegment in)
      : peer_(peer), out_(std::move(out)), in_(std::move(in)) {
    size_t stride = ringStride(capacity);
    auto* outBase = static_cast<std::byte*>(out_.data());
    auto* inBase = static_cast<std::byte*>(in_.data());
    sendPorts_.reserve(static_cast<size_t>(lanes));
    recvPorts_.reserve(static_cast<size_t>(lanes));
    for (int l = 0; l < lanes; ++l) {
      size_t at = static_cast<size_t>(l) * stride;
      sendPorts_.emplace_back(ByteRing(outBase + at, ByteRing::bytesFor(capacity), false), peer);
      recvPorts_.emplace_back(ByteRing(inBase + at, ByteRing::bytesFor(capacity), false), peer);
    }
  }
  // The peer sees the rings closed, not a silent stall.
  ~ShmConnection() override { close(); }

  int peer() const override { return peer_; }
  const char* transportName() const override { return "shm"; }
  int lanes() const override { return static_cast<int>(sendPorts_.size()); }
  SendPort& sendPort(int lane) override { return sendPorts_.at(static_cast<size_t>(lane)); }
  RecvPort& recvPort(int lane) override { return recvPorts_.at(static_cast<size_t>(lane)); }
  void close() override {
    for (auto& p : sendPorts_) p.close();
    for (auto& p : recvPorts_) p.close();
  }

 private:
  int peer_;
  ShmSegment out_;
  ShmSegment in_;
  std::vector<ShmSendPort> sendPorts_;
  std::vector<ShmRecvPort> recvPorts_;
};

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
  const size_t capacity = padToGranule(ctx.config.shmRingBytes);
  const size_t segBytes = ringStride(capacity) * static_cast<size_t>(ctx.lanes);

  // What all ranks of this host together put in /dev/shm (assuming they
  // connect as many peers as this one), for the message when it is too small.
  size_t localRanks = 1;
  if (ctx.ranks != nullptr) {
    localRanks = 0;
    for (const RankInfo& r : *ctx.ranks) {
      if (r.hostHash == (*ctx.ranks)[static_cast<size_t>(ctx.rank)].hostHash) ++localRanks;
    }
  }
  const size_t neededTotal = localRanks * peers.size() * segBytes;

  // 1. Senders create and initialise their outgoing rings.
  std::vector<ShmSegment> outgoing(peers.size());
  Status local;
  for (size_t i = 0; i < peers.size() && local.isOk(); ++i) {
    local = ShmSegment::create(segmentName(ctx.commTag, ctx.rank, peers[i]), segBytes, neededTotal,
                               &outgoing[i]);
    if (!local.isOk()) {
      local = Status(local.code(), "rank " + std::to_string(ctx.rank) + ": " + local.message());
      break;
    }
    auto* base = static_cast<std::byte*>(outgoing[i].data());
    for (int l = 0; l < ctx.lanes; ++l) {
      ByteRing(base + static_cast<size_t>(l) * ringStride(capacity), ByteRing::bytesFor(capacity),
               true);
    }
  }
  LANES_RETURN_IF_ERROR(
      agreeOnStatus(*ctx.bootstrap, local, "create its shared-memory rings", deadline));

  // 2. Receivers map their incoming rings.
  std::vector<ShmSegment> incoming(peers.size());
  for (size_t i = 0; i < peers.size() && local.isOk(); ++i) {
    local = ShmSegment::open(segmentName(ctx.commTag, peers[i], ctx.rank), segBytes, &incoming[i]);
    if (local.isOk()) {
      auto* header = static_cast<const ByteRingHeader*>(incoming[i].data());
      if (header->magic != ByteRing::kMagic || header->capacity != capacity) {
        local = systemError("shared-memory segment " + incoming[i].name() + " from rank " +
                            std::to_string(peers[i]) +
                            " has a different ring layout; LANES_SHM_RING_BYTES must be the "
                            "same on every rank");
      }
    }
  }
  LANES_RETURN_IF_ERROR(
      agreeOnStatus(*ctx.bootstrap, local, "map its peers' shared-memory rings", deadline));

  // 3. Everyone has mapped what it needs: the names can go.
  for (auto& seg : outgoing) seg.unlink();

  out->clear();
  for (size_t i = 0; i < peers.size(); ++i) {
    out->push_back(std::make_unique<ShmConnection>(peers[i], ctx.lanes, capacity,
                                                   std::move(outgoing[i]), std::move(incoming[i])));
  }
  LANES_INFO(Transport, ctx.rank, "shm: connected %zu peers, %d lanes of %zu bytes each",
             peers.size(), ctx.lanes, capacity);
  return Status::ok();
}

}  // namespace

std::unique_ptr<Transport> makeShmTransport() { return std::make_unique<ShmTransport>(); }

}  // namespace lanes
