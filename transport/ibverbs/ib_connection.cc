#include "transport/ibverbs/ib_connection.h"

#include <arpa/inet.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "base/log.h"
#include "transport/common/byte_ring.h"
#include "transport/ibverbs/ib_wire.h"
#include "transport/ibverbs/verbs_library.h"

namespace lanes::ib {
namespace {

constexpr uint32_t kHelloMagic = 0x4c494231;  // "LIB1"

// What a probe write leaves in the peer's probe word of its queue pair.
constexpr uint64_t kProbeWord = 0x4c414e4550524f42;  // "LANEPROB"

// Work request ids: what completed, on which queue pair, and for data
// writes which slot is free again.
constexpr uint64_t workId(WorkKind kind, int qp, int lane = 0, int slot = 0) {
  return static_cast<uint64_t>(kind) << 56 | static_cast<uint64_t>(qp) << 48 |
         static_cast<uint64_t>(lane) << 16 | static_cast<uint64_t>(slot);
}
constexpr WorkKind kindOf(uint64_t id) { return static_cast<WorkKind>(id >> 56); }
constexpr int qpOfId(uint64_t id) { return static_cast<int>((id >> 48) & 0xff); }
constexpr int laneOfId(uint64_t id) { return static_cast<int>((id >> 16) & 0xffff); }
constexpr int slotOfId(uint64_t id) { return static_cast<int>(id & 0xffff); }

class IbSendPort final : public SendPort {
 public:
  IbSendPort(IbConnection& c, int lane) : c_(c), lane_(lane) {}
  Status post(const void* src, size_t bytes, size_t* taken) override {
    return c_.post(lane_, src, bytes, taken);
  }

 private:
  IbConnection& c_;
  int lane_;
};

class IbRecvPort final : public RecvPort {
 public:
  IbRecvPort(IbConnection& c, int lane) : c_(c), lane_(lane) {}
  Status peek(std::span<const std::byte>* view) override { return c_.peek(lane_, view); }
  void consume(size_t bytes) override { c_.consume(lane_, bytes); }

 private:
  IbConnection& c_;
  int lane_;
};

const char* opcodeName(const ibv_wc& wc) {
  switch (kindOf(wc.wr_id)) {
    case WorkKind::Data:
      return "RDMA write of data";
    case WorkKind::Grant:
      return "RDMA write of a clear-to-send";
    case WorkKind::Receive:
      return "receive of a write's immediate";
    case WorkKind::Probe:
      return "RDMA write of the reachability probe";
  }
  return "work request";
}

}  // namespace

IbConnection::IbConnection(std::shared_ptr<IbDevice> device, const IbGeometry& geometry, int rank,
                           int peer)
    : device_(std::move(device)), geometry_(geometry), rank_(rank), peer_(peer) {}

IbConnection::~IbConnection() {
  if (!drained_) drain(Deadline::after(kConnectionDrainSeconds));
}

// A post returns once its bytes are in the send ring, so the last writes of
// a rank's last call may still be in flight: let them land before the queue
// pairs go (a peer that left stops this within its retries).
bool IbConnection::drain(Deadline deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  drained_ = true;
  auto busy = [&] {
    for (const SendLane& s : send_)
      for (uint8_t w : s.writing)
        if (w != 0) return true;
    return false;
  };
  for (;;) {
    if (!failed_.isOk() || !busy()) return true;
    if (deadline.expired() || !pollCompletionsLocked().isOk()) return !busy();
  }
}

Status IbConnection::create(std::shared_ptr<IbDevice> device, const IbGeometry& g,
                            const QpSettings& qpSettings, int rank, int peer,
                            std::unique_ptr<IbConnection>* out) {
  if (g.lanes < 1 || g.lanes > kMaxLanes || g.slots < 1 || g.slots > kMaxSlots || g.qps < 1 ||
      g.qps > kMaxQpsPerPeer || g.slotBytes < kWireUnit || g.slotBytes > kMaxSlotBytes ||
      g.slotBytes % kWireUnit != 0)
    return invalidArgument("verbs transport: rank " + std::to_string(rank) + ", peer rank " +
                           std::to_string(peer) + ": bad geometry (" + std::to_string(g.lanes) +
                           " lanes, " + std::to_string(g.slots) + " slots of " +
                           std::to_string(g.slotBytes) + " bytes, " + std::to_string(g.qps) +
                           " queue pairs)");
  std::unique_ptr<IbConnection> c(new IbConnection(std::move(device), g, rank, peer));
  const size_t grants = static_cast<size_t>(g.lanes) * static_cast<size_t>(g.slots);
  const size_t perQp = (grants + static_cast<size_t>(g.qps) - 1) / static_cast<size_t>(g.qps);
  c->qpSettings_ = qpSettings;
  // Each queue pair carries at most its share of data writes and of grants
  // at once; grants past that wait in grantsPending_.
  c->qpSettings_.sendDepth = static_cast<uint32_t>(2 * perQp);
  c->qpSettings_.recvDepth = static_cast<uint32_t>(perQp);
  c->qpSettings_.inlineBytes = sizeof(uint64_t);
  const ibv_device_attr& limits = c->device_->attr();
  const uint32_t cqe =
      (c->qpSettings_.sendDepth + c->qpSettings_.recvDepth) * static_cast<uint32_t>(g.qps);
  if (c->qpSettings_.sendDepth > static_cast<uint32_t>(limits.max_qp_wr) ||
      cqe > static_cast<uint32_t>(limits.max_cqe))
    return invalidUsage(c->describe(
        std::to_string(g.lanes) + " lanes of " + std::to_string(g.slots) + " slots over " +
        std::to_string(g.qps) + " queue pairs need " + std::to_string(c->qpSettings_.sendDepth) +
        " work requests per queue pair and " + std::to_string(cqe) +
        " completions; the device allows " + std::to_string(limits.max_qp_wr) + " and " +
        std::to_string(limits.max_cqe) +
        ": raise LANES_IB_QPS_PER_CONNECTION or LANES_IB_SLOT_BYTES, or lower "
        "LANES_IB_RING_BYTES"));
  const size_t rings = grants * g.slotBytes;
  int err = 0;
  if (!RegisteredBuffer::make(c->device_->pd(),
                              2 * rings + (grants + kMaxQpsPerPeer) * sizeof(uint64_t), &c->memory_,
                              &err))
    return systemError(
        c->describe("registering " + std::to_string(2 * rings) +
                    " bytes of rings failed: " + std::strerror(err) +
                    "; raise the locked-memory limit (ulimit -l) or lower LANES_IB_RING_BYTES"));
  const VerbsLibrary& v = VerbsLibrary::get();
  c->cq_ = owned(v.createCq(c->device_->context(), static_cast<int>(cqe), nullptr, nullptr, 0),
                 v.destroyCq);
  if (!c->cq_)
    return systemError(
        c->describe("ibv_create_cq(" + std::to_string(cqe) + ") failed: " + std::strerror(errno)));
  for (int q = 0; q < g.qps; ++q) {
    Owned<ibv_qp> qp{nullptr, nullptr};
    Status st = createQueuePair(*c->device_, c->cq_.get(), c->qpSettings_, &qp);
    if (!st.isOk()) return Status(st.code(), c->describe(st.message()));
    c->qpNumbers_.push_back(qp->qp_num);
    c->qps_.push_back(std::move(qp));
  }
  c->sendsInFlight_.assign(static_cast<size_t>(g.qps), 0);
  c->send_.resize(static_cast<size_t>(g.lanes));
  c->recv_.resize(static_cast<size_t>(g.lanes));
  for (int l = 0; l < g.lanes; ++l) {
    c->send_[static_cast<size_t>(l)].granted = static_cast<uint64_t>(g.slots);
    c->send_[static_cast<size_t>(l)].writing.assign(static_cast<size_t>(g.slots), 0);
    c->recv_[static_cast<size_t>(l)].filled.assign(static_cast<size_t>(g.slots), 0);
    c->sendPorts_.push_back(std::make_unique<IbSendPort>(*c, l));
    c->recvPorts_.push_back(std::make_unique<IbRecvPort>(*c, l));
  }
  *out = std::move(c);
  return Status::ok();
}

std::byte* IbConnection::recvSlot(int lane, int slot) const {
  return memory_.data() + static_cast<size_t>(lane) * ringBytes() +
         static_cast<size_t>(slot) * geometry_.slotBytes;
}

std::byte* IbConnection::sendSlot(int lane, int slot) const {
  return recvSlot(lane, slot) + static_cast<size_t>(geometry_.lanes) * ringBytes();
}

int IbConnection::qpOf(int lane, int slot) const {
  return (lane * geometry_.slots + slot) % geometry_.qps;
}

IbHello IbConnection::hello() const {
  IbHello h;
  h.magic = kHelloMagic;
  h.lanes = geometry_.lanes;
  h.slots = geometry_.slots;
  h.qps = geometry_.qps;
  h.slotBytes = geometry_.slotBytes;
  for (int q = 0; q < geometry_.qps; ++q) {
    h.qp[q] = device_->address();
    h.qp[q].qpn = qpNumbers_[static_cast<size_t>(q)];
  }
  h.recvRings = reinterpret_cast<uintptr_t>(recvSlot(0, 0));
  h.fifo = reinterpret_cast<uintptr_t>(sendSlot(0, 0)) +
           static_cast<size_t>(geometry_.lanes) * ringBytes();
  h.rkey = memory_.rkey();
  return h;
}

std::string IbConnection::describe(const std::string& what) const {
  return "verbs transport: rank " + std::to_string(rank_) + ", peer rank " + std::to_string(peer_) +
         " over " + device_->label() + ": " + what;
}

Status IbConnection::connect(const IbHello& remote, bool* unreachable) {
  *unreachable = false;
  const IbGeometry theirs{remote.lanes, remote.slots, static_cast<size_t>(remote.slotBytes),
                          remote.qps};
  if (remote.magic != kHelloMagic || !(theirs == geometry_))
    return invalidUsage(describe(
        "the two ranks disagree on the connection's shape (" + std::to_string(geometry_.lanes) +
        " vs " + std::to_string(theirs.lanes) + " lanes, " + std::to_string(geometry_.slots) +
        " vs " + std::to_string(theirs.slots) + " slots of " + std::to_string(geometry_.slotBytes) +
        " vs " + std::to_string(theirs.slotBytes) + " bytes, " + std::to_string(geometry_.qps) +
        " vs " + std::to_string(theirs.qps) +
        " queue pairs); set LANES_IB_RING_BYTES, LANES_IB_SLOT_BYTES, "
        "LANES_IB_QPS_PER_CONNECTION and LANES_NLANES alike on every rank"));
  std::lock_guard<std::mutex> lock(mu_);
  remoteRecvRings_ = remote.recvRings;
  remoteFifo_ = remote.fifo;
  remoteKey_ = remote.rkey;
  for (int q = 0; q < geometry_.qps; ++q) {
    for (uint32_t r = 0; r < qpSettings_.recvDepth; ++r)
      LANES_RETURN_IF_ERROR(postReceiveLocked(q));
    Status st = connectQueuePair(*device_, qps_[static_cast<size_t>(q)].get(), remote.qp[q],
                                 qpSettings_, unreachable);
    if (!st.isOk()) return Status(st.code(), describe(st.message()));
  }
  return Status::ok();
}

Status IbConnection::postReceiveLocked(int qp) {
  ibv_recv_wr wr{}, *bad = nullptr;
  wr.wr_id = workId(WorkKind::Receive, qp);
  if (int rc = ibv_post_recv(qps_[static_cast<size_t>(qp)].get(), &wr, &bad); rc != 0)
    return systemError(describe(std::string("ibv_post_recv failed: ") + std::strerror(rc)));
  return Status::ok();
}

void IbConnection::failLocked(const std::string& why) {
  if (!failed_.isOk()) return;
  failed_ = remoteError(why);
  for (auto& qp : qps_) failQueuePair(qp.get());
  LANES_WARN(Transport, rank_, "%s", why.c_str());
}

void IbConnection::close() {
  std::lock_guard<std::mutex> lock(mu_);
  failLocked(describe("the connection was closed (abort, or a peer failed)"));
}

Status IbConnection::pollCompletionsLocked() {
  ibv_wc wcs[32];
  for (;;) {
    const int n = ibv_poll_cq(cq_.get(), 32, wcs);
    if (n < 0) return systemError(describe("ibv_poll_cq failed"));
    for (int i = 0; i < n; ++i) {
      const ibv_wc& wc = wcs[i];
      if (wc.status != IBV_WC_SUCCESS) {
        if (failed_.isOk())
          failLocked(describe(std::string(opcodeName(wc)) +
                              " failed: " + VerbsLibrary::get().wcStatusStr(wc.status) +
                              " (vendor error " + std::to_string(wc.vendor_err) +
                              "); the peer may have exited or its port gone down"));
        continue;
      }
      const int qp = qpOfId(wc.wr_id);
      switch (kindOf(wc.wr_id)) {
        case WorkKind::Data:
          send_[static_cast<size_t>(laneOfId(wc.wr_id))]
              .writing[static_cast<size_t>(slotOfId(wc.wr_id))] = 0;
          --sendsInFlight_[static_cast<size_t>(qp)];
          break;
        case WorkKind::Grant:
          --sendsInFlight_[static_cast<size_t>(qp)];
          break;
        case WorkKind::Receive: {
          const DataImmediate d = unpackImmediate(ntohl(wc.imm_data));
          if ((wc.wc_flags & IBV_WC_WITH_IMM) == 0 || d.lane >= geometry_.lanes ||
              d.slot >= geometry_.slots || d.bytes == 0 || d.bytes > geometry_.slotBytes ||
              recv_[static_cast<size_t>(d.lane)].filled[static_cast<size_t>(d.slot)] != 0) {
            failLocked(describe("the peer wrote outside the protocol (immediate " +
                                std::to_string(ntohl(wc.imm_data)) + ")"));
            continue;
          }
          recv_[static_cast<size_t>(d.lane)].filled[static_cast<size_t>(d.slot)] =
              static_cast<uint32_t>(d.bytes);
          if (failed_.isOk()) {
            Status st = postReceiveLocked(qp);
            if (!st.isOk()) failLocked(st.message());
          }
          break;
        }
        case WorkKind::Probe:
          --sendsInFlight_[static_cast<size_t>(qp)];
          break;
      }
    }
    if (n < 32) return Status::ok();
  }
}

void IbConnection::readGrantsLocked() {
  const size_t fifoEntries = static_cast<size_t>(geometry_.lanes * geometry_.slots);
  auto* fifo = reinterpret_cast<uint64_t*>(sendSlot(0, 0) +
                                           static_cast<size_t>(geometry_.lanes) * ringBytes());
  for (;;) {
    const uint64_t word =
        std::atomic_ref<uint64_t>(fifo[grantsRead_ % fifoEntries]).load(std::memory_order_acquire);
    const ClearToSend c = unpackClearToSend(word);
    if (c.seq != static_cast<uint32_t>(grantsRead_ + 1)) return;
    if (c.lane >= geometry_.lanes) {
      failLocked(describe("the peer granted a slot of lane " + std::to_string(c.lane)));
      return;
    }
    SendLane& s = send_[static_cast<size_t>(c.lane)];
    if (c.slot != static_cast<int>(s.granted % static_cast<uint64_t>(geometry_.slots))) {
      failLocked(describe("the peer granted slot " + std::to_string(c.slot) + " out of order"));
      return;
    }
    ++s.granted;
    ++grantsRead_;
  }
}

bool IbConnection::writeWordLocked(WorkKind kind, int q, uint64_t remoteAddr, uint64_t word,
                                   const char* what) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(&word);  // inline: copied at the post
  sge.length = sizeof(word);
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = workId(kind, q);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  wr.wr.rdma.remote_addr = remoteAddr;
  wr.wr.rdma.rkey = remoteKey_;
  if (int rc = ibv_post_send(qps_[static_cast<size_t>(q)].get(), &wr, &bad); rc != 0) {
    failLocked(describe(std::string("posting ") + what + " failed: " + std::strerror(rc)));
    return false;
  }
  ++sendsInFlight_[static_cast<size_t>(q)];
  return true;
}

void IbConnection::flushGrantsLocked() {
  const size_t fifoEntries = static_cast<size_t>(geometry_.lanes * geometry_.slots);
  size_t sent = 0;
  for (; sent < grantsPending_.size() && failed_.isOk(); ++sent) {
    const int q = static_cast<int>(grantsWritten_ % static_cast<uint64_t>(geometry_.qps));
    if (sendsInFlight_[static_cast<size_t>(q)] >= qpSettings_.sendDepth) break;
    if (!writeWordLocked(WorkKind::Grant, q,
                         remoteFifo_ + (grantsWritten_ % fifoEntries) * sizeof(uint64_t),
                         grantsPending_[sent], "a clear-to-send"))
      break;
    ++grantsWritten_;
  }
  grantsPending_.erase(grantsPending_.begin(),
                       grantsPending_.begin() + static_cast<std::ptrdiff_t>(sent));
}

Status IbConnection::progressLocked() {
  if (failed_.isOk()) {
    Status st = pollCompletionsLocked();
    if (st.isOk()) st = device_->checkEvents(qpNumbers_);
    if (!st.isOk())
      failLocked(st.message().find("verbs transport") == 0 ? st.message() : describe(st.message()));
  }
  if (!failed_.isOk()) return failed_;
  readGrantsLocked();
  flushGrantsLocked();
  return failed_;
}

uint64_t* IbConnection::probeWords() const {
  return reinterpret_cast<uint64_t*>(sendSlot(0, 0) +
                                     static_cast<size_t>(geometry_.lanes) * ringBytes()) +
         static_cast<size_t>(geometry_.lanes * geometry_.slots);
}

Status IbConnection::sendProbes() {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t remoteProbes =
      remoteFifo_ + static_cast<uint64_t>(geometry_.lanes * geometry_.slots) * sizeof(uint64_t);
  for (int q = 0; q < geometry_.qps && failed_.isOk(); ++q)
    writeWordLocked(WorkKind::Probe, q, remoteProbes + static_cast<uint64_t>(q) * sizeof(uint64_t),
                    kProbeWord + static_cast<uint64_t>(q), "the reachability probe");
  return failed_;
}

Status IbConnection::probesArrived(bool* arrived) {
  std::lock_guard<std::mutex> lock(mu_);
  *arrived = false;
  if (failed_.isOk()) {
    Status st = pollCompletionsLocked();
    if (!st.isOk()) failLocked(st.message());
  }
  LANES_RETURN_IF_ERROR(failed_);
  const uint64_t* words = probeWords();
  *arrived = true;
  for (int q = 0; q < geometry_.qps; ++q)
    *arrived = *arrived && std::atomic_ref<const uint64_t>(words[q]).load(
                               std::memory_order_acquire) == kProbeWord + static_cast<uint64_t>(q);
  return Status::ok();
}

Status IbConnection::post(int lane, const void* src, size_t bytes, size_t* taken) {
  *taken = 0;
  int slot = 0, q = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    LANES_RETURN_IF_ERROR(progressLocked());
    if (bytes == 0) return Status::ok();
    SendLane& s = send_[static_cast<size_t>(lane)];
    slot = static_cast<int>(s.used % static_cast<uint64_t>(geometry_.slots));
    q = qpOf(lane, slot);
    if (s.used == s.granted || s.writing[static_cast<size_t>(slot)] != 0 ||
        sendsInFlight_[static_cast<size_t>(q)] >= qpSettings_.sendDepth)
      return Status::ok();
    s.writing[static_cast<size_t>(slot)] = 1;
    ++s.used;
    ++sendsInFlight_[static_cast<size_t>(q)];
  }
  // The slot is this call's alone now: copy outside the lock, so lanes
  // driven by other threads are not held up.
  const size_t n = std::min(bytes, geometry_.slotBytes);
  // The executor pads every message to kRingGranule (transport.h), so only
  // a post's last piece may be short, and then it is padded too.
  static_assert(kRingGranule % kWireUnit == 0);
  const size_t wire = (n + kWireUnit - 1) / kWireUnit * kWireUnit;
  std::memcpy(sendSlot(lane, slot), src, n);
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(sendSlot(lane, slot));
  sge.length = static_cast<uint32_t>(wire);
  sge.lkey = memory_.lkey();
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = workId(WorkKind::Data, q, lane, slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(packImmediate(DataImmediate{lane, slot, wire}));
  wr.wr.rdma.remote_addr =
      remoteRecvRings_ + static_cast<uint64_t>(recvSlot(lane, slot) - recvSlot(0, 0));
  wr.wr.rdma.rkey = remoteKey_;
  std::lock_guard<std::mutex> lock(mu_);
  LANES_RETURN_IF_ERROR(failed_);
  if (int rc = ibv_post_send(qps_[static_cast<size_t>(q)].get(), &wr, &bad); rc != 0) {
    failLocked(describe(std::string("posting an RDMA write failed: ") + std::strerror(rc)));
    return failed_;
  }
  *taken = n;
  return Status::ok();
}

Status IbConnection::peek(int lane, std::span<const std::byte>* view) {
  std::lock_guard<std::mutex> lock(mu_);
  *view = {};
  Status st = progressLocked();
  const RecvLane& r = recv_[static_cast<size_t>(lane)];
  const int slot = static_cast<int>(r.read % static_cast<uint64_t>(geometry_.slots));
  const uint32_t filled = r.filled[static_cast<size_t>(slot)];
  if (filled > r.offset) {
    *view = std::span<const std::byte>(recvSlot(lane, slot) + r.offset, filled - r.offset);
    return Status::ok();
  }
  return st;
}

void IbConnection::consume(int lane, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  RecvLane& r = recv_[static_cast<size_t>(lane)];
  const int slot = static_cast<int>(r.read % static_cast<uint64_t>(geometry_.slots));
  uint32_t& filled = r.filled[static_cast<size_t>(slot)];
  r.offset = std::min<size_t>(r.offset + bytes, filled);
  if (filled == 0 || r.offset < filled) return;
  filled = 0;
  r.offset = 0;
  ++r.read;
  grantsPending_.push_back(packClearToSend(
      ClearToSend{static_cast<uint32_t>(grantsWritten_ + grantsPending_.size() + 1), lane, slot}));
  flushGrantsLocked();
}

}  // namespace lanes::ib
