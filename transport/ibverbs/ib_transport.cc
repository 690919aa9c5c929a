// Verbs transport: reaches ranks of other hosts through the RDMA port the
// communicator chose for each rank (IbConfig: LANES_IB_HCA, the GID, the
// port nearest the GPU). A pair talks verbs only where both ranks opened a
// port; every other pair is left to the next transport (TCP), so a cluster
// where some hosts lack a NIC still runs. Queue pairs are made and joined at
// init: each side sends its IbHello to each verbs peer over the bootstrap,
// joins the peer's queue pairs, and the communicator agrees that every rank
// got there before any data may be written.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "transport/common/agree.h"
#include "transport/ibverbs/ib_connection.h"
#include "transport/ibverbs/ib_wire.h"
#include "transport/transport.h"

namespace lanes {
namespace {

constexpr uint32_t kHelloTag = 0x49424800u;  // "IBH" 0

ib::IbGeometry geometryOf(const TransportContext& ctx) {
  const IbConfig& c = ctx.config.ib;
  ib::IbGeometry g;
  g.lanes = ctx.lanes;
  g.slotBytes = c.slotBytes;
  g.slots = static_cast<int>(std::max<size_t>(1, c.ringBytes / c.slotBytes));
  g.qps = c.qpsPerPeer;
  return g;
}

ib::QpSettings qpSettingsOf(const IbConfig& c) {
  ib::QpSettings s;
  s.trafficClass = c.trafficClass;
  s.timeout = c.timeout;
  s.retryCount = c.retryCount;
  return s;
}

class IbTransport final : public Transport {
 public:
  const char* name() const override { return "ib"; }
  bool canConnect(const RankInfo& self, const RankInfo& peer) const override {
    return self.hostHash != peer.hostHash;
  }
  Status connect(const TransportContext& ctx, const std::vector<int>& peers,
                 std::vector<std::unique_ptr<Connection>>* out) override;
};

// Opens this rank's port where it has verbs peers and a chosen port; else
// says why not (a log line, not an error: those peers use TCP).
std::shared_ptr<ib::IbDevice> openPort(const TransportContext& ctx, const std::vector<int>& peers) {
  const IbConfig& c = ctx.config.ib;
  if (peers.empty() || c.disabled) return nullptr;
  if (c.device.empty()) {
    LANES_INFO(Transport, ctx.rank, "ib: not used: %s; ranks of other hosts use TCP",
               c.unavailable.c_str());
    return nullptr;
  }
  std::shared_ptr<ib::IbDevice> device;
  Status st = ib::IbDevice::open(c.device, c.port, c.gidIndex, &device);
  if (!st.isOk()) {
    LANES_WARN(Transport, ctx.rank, "%s; ranks of other hosts use TCP", st.message().c_str());
    return nullptr;
  }
  return device;
}

Status IbTransport::connect(const TransportContext& ctx, const std::vector<int>& peers,
                            std::vector<std::unique_ptr<Connection>>* out) {
  if (ctx.bootstrap == nullptr || ctx.ranks == nullptr)
    return invalidArgument("ib transport: connect needs a bootstrap and the ranks");
  // A communicator within one host has no verbs pairs: every rank sees that
  // alike and skips the exchange.
  bool oneHost = true;
  for (const RankInfo& r : *ctx.ranks)
    oneHost = oneHost && r.hostHash == ctx.ranks->front().hostHash;
  out->clear();
  if (oneHost) {
    out->resize(peers.size());
    return Status::ok();
  }
  Deadline deadline = Deadline::after(ctx.timeoutSeconds);
  std::shared_ptr<ib::IbDevice> device = openPort(ctx, peers);
  std::vector<uint8_t> usable(static_cast<size_t>(ctx.nranks), 0);
  usable[static_cast<size_t>(ctx.rank)] = device ? 1 : 0;
  LANES_RETURN_IF_ERROR(ctx.bootstrap->allGather(usable.data(), 1, deadline));

  out->resize(peers.size());
  std::vector<ib::IbConnection*> joined(peers.size(), nullptr);
  std::vector<bool> talks(peers.size(), false);
  const ib::IbGeometry geometry = geometryOf(ctx);
  Status local;
  for (size_t i = 0; i < peers.size(); ++i) {
    talks[i] = device && usable[static_cast<size_t>(peers[i])] != 0;
    if (!talks[i] || !local.isOk()) continue;
    std::unique_ptr<ib::IbConnection> c;
    local = ib::IbConnection::create(device, geometry, qpSettingsOf(ctx.config.ib), ctx.rank,
                                     peers[i], &c);
    joined[i] = c.get();
    (*out)[i] = std::move(c);
  }
  // Every verbs peer gets a hello, an empty one where this rank failed, so
  // no rank waits for one that will not come.
  for (size_t i = 0; i < peers.size(); ++i) {
    if (!talks[i]) continue;
    const ib::IbHello hello =
        joined[i] != nullptr && local.isOk() ? joined[i]->hello() : ib::IbHello{};
    Status sent = ctx.bootstrap->send(peers[i], kHelloTag, &hello, sizeof(hello));
    if (local.isOk()) local = sent;
  }
  for (size_t i = 0; i < peers.size(); ++i) {
    if (!talks[i]) continue;
    std::vector<uint8_t> bytes;
    Status st = ctx.bootstrap->recv(peers[i], kHelloTag, &bytes, deadline);
    if (!local.isOk()) continue;
    ib::IbHello remote;
    if (st.isOk() && bytes.size() != sizeof(remote))
      st = invalidUsage("ib transport: rank " + std::to_string(peers[i]) +
                        " sent a connection hello of another size; run the same Lanes build on "
                        "every rank");
    if (st.isOk()) std::memcpy(&remote, bytes.data(), sizeof(remote));
    if (st.isOk() && remote.magic == 0)
      st = remoteError("ib transport: rank " + std::to_string(peers[i]) +
                       " could not set up its queue pairs; its own error says why");
    if (st.isOk()) st = joined[i]->connect(remote);
    local = st;
  }
  LANES_RETURN_IF_ERROR(
      agreeOnStatus(*ctx.bootstrap, local, "connect its RDMA queue pairs", deadline));
  size_t connected = 0;
  for (auto* c : joined) connected += c != nullptr ? 1 : 0;
  if (connected > 0)
    LANES_INFO(Transport, ctx.rank,
               "ib: connected %zu of %zu peers of other hosts over %s (%d queue pairs, %d lanes x "
               "%d slots of %zu bytes each way)",
               connected, peers.size(), device->label().c_str(), geometry.qps, geometry.lanes,
               geometry.slots, geometry.slotBytes);
  return Status::ok();
}

}  // namespace

std::unique_ptr<Transport> makeIbTransport() { return std::make_unique<IbTransport>(); }

}  // namespace lanes
