// TCP transport: reaches any rank. Each process listens on one data address
// (SocketHub: an interface picked by LANES_SOCKET_IFNAME, of the bootstrap's
// family), and a communicator's connect only gathers every rank's address
// and settings. A connection opens its sockets when it is first used
// (SocketSide), so a rank holds sockets and worker threads only to the
// peers its plans talk to: two for a ring, not N - 1. Every data socket
// opens with a hello carrying the communicator's secret and id and (rank,
// socket index), so a stray or foreign connection is refused.
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/log.h"
#include "base/socket.h"
#include "bootstrap/bootstrap.h"
#include "transport/common/agree.h"
#include "transport/common/byte_ring.h"
#include "transport/socket/socket_connection.h"
#include "transport/socket/socket_side.h"
#include "transport/transport.h"

namespace lanes {
namespace {

// What each rank publishes in the communicator's all-gather.
struct Endpoint {
  SocketAddress address;  // the process's data listener; unset without socket peers
  SocketSettings settings;
};

SocketConnectionConfig connectionConfig(const TransportContext& ctx) {
  SocketConnectionConfig c;
  c.rank = ctx.rank;
  c.lanes = ctx.lanes;
  c.threads = ctx.config.socketThreads;
  c.socketsPerThread = ctx.config.socketsPerThread;
  c.stripeBytes = padToGranule(ctx.config.socketStripeBytes);
  size_t ring = std::max(ctx.config.socketRingBytes, c.stripeBytes);
  c.bufferBytes = (ring + c.stripeBytes - 1) / c.stripeBytes * c.stripeBytes;
  c.zeroCopyMinBytes = ctx.config.socketZeroCopyBytes;
  c.busyPollUs = ctx.config.socketBusyPollUs;
  return c;
}

// The engine moves the bytes where this host's engines and the workers they
// would wake outnumber its cores (the spin budget's count): there a thread
// switch per packet costs more than the engine's own send and receive.
bool engineMovesBytes(const TransportContext& ctx, size_t tcpPeers) {
  if (ctx.config.socketMover != SocketMover::Auto)
    return ctx.config.socketMover == SocketMover::Engine;
  int localRanks = 1;
  if (ctx.ranks != nullptr) {
    const RankInfo& self = (*ctx.ranks)[static_cast<size_t>(ctx.rank)];
    localRanks = 0;
    for (const RankInfo& r : *ctx.ranks) localRanks += r.hostHash == self.hostHash ? 1 : 0;
  }
  const int threads =
      threadsMovingBytes(localRanks, static_cast<int>(tcpPeers), ctx.config.socketThreads);
  return threads > sysconf(_SC_NPROCESSORS_ONLN);
}

SocketSettings settingsOf(const SocketConnectionConfig& c) {
  return SocketSettings{c.threads * c.socketsPerThread, c.lanes, c.bufferBytes, c.stripeBytes};
}

// Settings are checked here, where every rank sees every other's, so that a
// mismatch fails init on every rank instead of a first call on some.
Status checkSettings(const TransportContext& ctx, const std::vector<int>& peers,
                     const std::vector<Endpoint>& endpoints) {
  const SocketSettings& mine = endpoints[static_cast<size_t>(ctx.rank)].settings;
  for (int p : peers) {
    const SocketSettings& theirs = endpoints[static_cast<size_t>(p)].settings;
    if (theirs == mine) continue;
    return invalidUsage(
        "rank " + std::to_string(ctx.rank) + " and rank " + std::to_string(p) +
        " disagree on the socket transport's settings (" + std::to_string(mine.sockets) + " vs " +
        std::to_string(theirs.sockets) + " sockets, " + std::to_string(mine.lanes) + " vs " +
        std::to_string(theirs.lanes) + " lanes, " + std::to_string(mine.bufferBytes) + " vs " +
        std::to_string(theirs.bufferBytes) + " ring bytes, " + std::to_string(mine.stripeBytes) +
        " vs " + std::to_string(theirs.stripeBytes) +
        " stripe bytes); set LANES_SOCKET_NTHREADS, LANES_NSOCKS_PERTHREAD, "
        "LANES_SOCKET_RING_BYTES, LANES_SOCKET_STRIPE_BYTES and LANES_NLANES alike on every rank");
  }
  return Status::ok();
}

class SocketTransport final : public Transport {
 public:
  const char* name() const override { return "tcp"; }
  bool canConnect(const RankInfo&, const RankInfo&) const override { return true; }
  Status connect(const TransportContext& ctx, const std::vector<int>& peers,
                 std::vector<std::unique_ptr<Connection>>* out) override;
};

Status SocketTransport::connect(const TransportContext& ctx, const std::vector<int>& peers,
                                std::vector<std::unique_ptr<Connection>>* out) {
  if (ctx.bootstrap == nullptr || ctx.lanes <= 0 || ctx.lanes > 65535) {
    return invalidArgument("socket transport: connect needs a bootstrap and 1..65535 lanes");
  }
  Deadline deadline = Deadline::after(ctx.timeoutSeconds);
  SocketConnectionConfig cfg = connectionConfig(ctx);
  cfg.engineMoves = engineMovesBytes(ctx, peers.size());
  const UniqueIdData& id = ctx.bootstrap->id();

  // Only ranks with socket peers open (or share) the process's listener.
  std::shared_ptr<SocketHub> hub;
  std::vector<Endpoint> endpoints(static_cast<size_t>(ctx.nranks));
  Endpoint& self = endpoints[static_cast<size_t>(ctx.rank)];
  self.settings = settingsOf(cfg);
  Status local;
  if (!peers.empty()) {
    local = SocketHub::acquire(ctx.config.socketIfname, id.family, ctx.rank, &hub);
    if (local.isOk()) self.address = hub->address();
  }
  LANES_RETURN_IF_ERROR(ctx.bootstrap->allGather(endpoints.data(), sizeof(Endpoint), deadline));
  if (local.isOk()) local = checkSettings(ctx, peers, endpoints);
  std::shared_ptr<SocketSide> side;
  if (local.isOk() && hub) {
    std::vector<SocketAddress> addresses;
    addresses.reserve(endpoints.size());
    for (const Endpoint& e : endpoints) addresses.push_back(e.address);
    local = SocketSide::create(id, ctx.rank, self.settings, std::move(addresses), hub, &side);
  }
  LANES_RETURN_IF_ERROR(
      agreeOnStatus(*ctx.bootstrap, local, "set up its socket transport", deadline));

  out->clear();
  for (int p : peers) {
    SocketConnectionConfig c = cfg;
    c.peer = p;
    c.peerAddress = side->endpoint(p).toString();
    const double timeout = ctx.timeoutSeconds;
    // From the first use on: the peer may enter its first call much later.
    auto establish = [side, p, timeout](const std::atomic<bool>& abandoned,
                                        std::vector<Socket>* sockets) {
      return side->establish(p, abandoned, Deadline::after(timeout), sockets);
    };
    std::unique_ptr<Connection> conn;
    LANES_RETURN_IF_ERROR(makeSocketConnection(c, std::move(establish), &conn));
    out->push_back(std::move(conn));
  }
  LANES_INFO(Transport, ctx.rank,
             "tcp: connected %zu peers (sockets opened on first use: %d threads x %d sockets "
             "each, %zu-byte stripes; %s)",
             peers.size(), cfg.threads, cfg.socketsPerThread, cfg.stripeBytes,
             cfg.engineMoves ? "the engine moves the bytes, the workers finish what it leaves"
                             : "the workers move the bytes");
  return Status::ok();
}

}  // namespace

std::unique_ptr<Transport> makeSocketTransport() { return std::make_unique<SocketTransport>(); }

}  // namespace lanes
