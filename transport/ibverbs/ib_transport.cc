// Verbs transport: reaches ranks of other hosts through the RDMA port the
// communicator chose for each rank (IbConfig: LANES_IB_HCA, the GID, the
// port nearest the GPU). A pair talks verbs only where both ranks opened a
// port of one link layer and made their queue pairs, and their probes
// reached each other; every other pair is left to the next transport (TCP),
// so a cluster where some hosts lack a NIC still runs. Queue pairs are made
// and joined at init: each side sends its IbHello to each verbs peer over
// the bootstrap, joins the peer's queue pairs, and the communicator agrees
// that every rank got there before any data may be written.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "transport/common/agree.h"
#include "transport/ibverbs/ib_connection.h"
#include "transport/ibverbs/ib_wire.h"
#include "transport/ibverbs/link_kind.h"
#include "transport/transport.h"

namespace lanes {
namespace {

constexpr uint32_t kHelloTag = 0x49424800u;  // "IBH" 0
constexpr uint32_t kProbeTag = 0x49424801u;  // "IBH" 1
// How long a pair's reachability probes may take at init.
constexpr double kProbeSeconds = 20;

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

// Joined queue pairs exchange no packets, so ports that cannot reach each
// other (other fabrics, unrouted subnets) would only show as a first
// collective's exhausted retries. Each pair writes a probe through every
// queue pair and tells the other what arrived; a pair where either side
// missed one goes to TCP, with a warning naming it.
// `why`: per peer, why this side already knows the pair cannot work (its
// queue pairs found no way to the peer), else OK.
Status checkReachable(const TransportContext& ctx, const std::vector<int>& peers,
                      std::vector<std::unique_ptr<Connection>>* out,
                      std::vector<ib::IbConnection*>* joined, std::vector<Status> why) {
  const Deadline deadline = Deadline::after(std::min(ctx.timeoutSeconds, kProbeSeconds));
  // A peer sends its verdict only once its own probes' wait ended, while a
  // rank that knew its verdict at once waits for it from the start.
  const Deadline verdicts =
      Deadline::after(std::min(ctx.timeoutSeconds, kProbeSeconds) + ctx.timeoutSeconds);
  std::vector<uint8_t> arrived(peers.size(), 0);
  for (size_t i = 0; i < peers.size(); ++i)
    if ((*joined)[i] != nullptr && why[i].isOk()) why[i] = (*joined)[i]->sendProbes();
  Backoff backoff;
  for (bool waiting = true; waiting && !deadline.expired(); backoff.pause()) {
    waiting = false;
    for (size_t i = 0; i < peers.size(); ++i) {
      if ((*joined)[i] == nullptr || arrived[i] != 0 || !why[i].isOk()) continue;
      bool done = false;
      why[i] = (*joined)[i]->probesArrived(&done);
      arrived[i] = done ? 1 : 0;
      waiting = waiting || (why[i].isOk() && !done);
    }
  }
  for (size_t i = 0; i < peers.size(); ++i)
    if ((*joined)[i] != nullptr)
      LANES_RETURN_IF_ERROR(ctx.bootstrap->send(peers[i], kProbeTag, &arrived[i], 1));
  for (size_t i = 0; i < peers.size(); ++i) {
    if ((*joined)[i] == nullptr) continue;
    std::vector<uint8_t> theirs;
    LANES_RETURN_IF_ERROR(ctx.bootstrap->recv(peers[i], kProbeTag, &theirs, verdicts));
    if (arrived[i] != 0 && theirs.size() == 1 && theirs[0] != 0) continue;
    LANES_WARN(Transport, ctx.rank,
               "ib: rank %d and rank %d cannot reach each other over their RDMA ports (%s); "
               "they use TCP. Check that both ports are on one fabric or routed subnet "
               "(lanes-topo lists them; LANES_IB_HCA picks others)",
               ctx.rank, peers[i],
               !why[i].isOk()    ? why[i].message().c_str()
               : arrived[i] == 0 ? "the peer's probe did not arrive"
                                 : "this rank's probe did not reach the peer");
    (*joined)[i] = nullptr;
    (*out)[i].reset();
  }
  return Status::ok();
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
  const ib::IbGeometry geometry = geometryOf(ctx);
  // Everything that can fail on this rank alone (registration under the
  // locked-memory limit, queue pairs) is made before the ranks compare
  // notes, so such a failure sends this rank's pairs to TCP instead of
  // failing the communicator.
  out->resize(peers.size());
  for (size_t i = 0; i < peers.size() && device; ++i) {
    std::unique_ptr<ib::IbConnection> c;
    Status st = ib::IbConnection::create(device, geometry, qpSettingsOf(ctx.config.ib), ctx.rank,
                                         peers[i], &c);
    if (!st.isOk()) {
      LANES_WARN(Transport, ctx.rank, "%s; ranks of other hosts use TCP", st.message().c_str());
      for (auto& made : *out) made.reset();
      device.reset();
      break;
    }
    (*out)[i] = std::move(c);
  }
  // What each rank can do (link_kind.h): a pair talks verbs only over ports
  // of one link layer.
  using ib::LinkKind;
  std::vector<LinkKind> kind(static_cast<size_t>(ctx.nranks), LinkKind::None);
  const LinkKind mine = !device          ? LinkKind::None
                        : device->roce() ? LinkKind::Ethernet
                                         : LinkKind::InfiniBand;
  kind[static_cast<size_t>(ctx.rank)] = mine;
  static_assert(sizeof(LinkKind) == 1);
  LANES_RETURN_IF_ERROR(ctx.bootstrap->allGather(kind.data(), 1, deadline));
  std::vector<ib::IbConnection*> joined(peers.size(), nullptr);
  for (size_t i = 0; i < peers.size(); ++i) {
    const LinkKind theirs = kind[static_cast<size_t>(peers[i])];
    if (ib::joinsOverVerbs(mine, theirs)) {
      joined[i] = static_cast<ib::IbConnection*>((*out)[i].get());
      continue;
    }
    (*out)[i].reset();
    if (const std::string why = ib::whyNotOverVerbs(mine, theirs, peers[i]); !why.empty())
      LANES_INFO(Transport, ctx.rank, "ib: %s", why.c_str());
  }

  // Hellos both ways to every verbs peer; a pair that cannot be joined
  // (mismatched settings) fails the communicator on every rank, while one
  // whose ports find no way to each other is left to the probes' verdict
  // below, which sends it to TCP on both sides.
  Status local;
  std::vector<Status> unreachable(peers.size());
  for (size_t i = 0; i < peers.size(); ++i) {
    if (joined[i] == nullptr) continue;
    const ib::IbHello hello = joined[i]->hello();
    Status sent = ctx.bootstrap->send(peers[i], kHelloTag, &hello, sizeof(hello));
    if (local.isOk()) local = sent;
  }
  for (size_t i = 0; i < peers.size(); ++i) {
    if (joined[i] == nullptr) continue;
    std::vector<uint8_t> bytes;
    Status st = ctx.bootstrap->recv(peers[i], kHelloTag, &bytes, deadline);
    if (!local.isOk()) continue;
    ib::IbHello remote;
    if (st.isOk() && bytes.size() != sizeof(remote))
      st = invalidUsage("ib transport: rank " + std::to_string(peers[i]) +
                        " sent a connection hello of another size; run the same Lanes build on "
                        "every rank");
    if (st.isOk()) std::memcpy(&remote, bytes.data(), sizeof(remote));
    bool noWay = false;
    if (st.isOk()) st = joined[i]->connect(remote, &noWay);
    if (noWay) {
      unreachable[i] = st;
      st = Status::ok();
    }
    local = st;
  }
  LANES_RETURN_IF_ERROR(
      agreeOnStatus(*ctx.bootstrap, local, "connect its RDMA queue pairs", deadline));
  LANES_RETURN_IF_ERROR(checkReachable(ctx, peers, out, &joined, std::move(unreachable)));
  size_t connected = 0;
  for (auto* c : joined) connected += c != nullptr ? 1 : 0;
  if (connected > 0)
    LANES_INFO(Transport, ctx.rank,
               "ib: connected %zu of %zu peers of other hosts over %s (%d queue pairs, %d lanes x "
               "%d slots of %zu bytes each way, %zu bytes registered per peer)",
               connected, peers.size(), device->label().c_str(), geometry.qps, geometry.lanes,
               geometry.slots, geometry.slotBytes,
               2 * static_cast<size_t>(geometry.lanes * geometry.slots) * geometry.slotBytes);
  return Status::ok();
}

}  // namespace

std::unique_ptr<Transport> makeIbTransport() { return std::make_unique<IbTransport>(); }

}  // namespace lanes
