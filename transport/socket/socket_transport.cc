// TCP transport: reaches any rank. Every rank listens on one data address
// (an interface picked by LANES_SOCKET_IFNAME, of the bootstrap's family);
// the addresses travel through the bootstrap's all-gather, the lower rank of
// each pair connects, and every data socket opens with a hello carrying the
// communicator's secret and id and (rank, socket index), so a stray or
// foreign connection is refused.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/socket.h"
#include "bootstrap/bootstrap.h"
#include "transport/common/agree.h"
#include "transport/common/byte_ring.h"
#include "transport/socket/socket_connection.h"
#include "transport/transport.h"

namespace lanes {
namespace {

constexpr uint32_t kHelloMagic = 0x4c4e4454;  // "LNDT"
constexpr uint32_t kHelloVersion = 1;
constexpr int kMaxSockets = TransportConfig::kMaxSocketsPerPeer;
// A connection that does not say hello within this long is dropped.
constexpr double kHelloSeconds = 10;

struct DataHello {
  uint32_t magic;
  uint32_t version;
  uint8_t secret[32];
  uint64_t commId;
  int32_t srcRank;
  int32_t dstRank;
  int32_t socketIndex;
  int32_t sockets;
  int32_t lanes;
  int32_t reserved;
  uint64_t bufferBytes;
  uint64_t stripeBytes;
};

// This rank's data listener as the others see it.
struct Endpoint {
  SocketAddress address;
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
  return c;
}

bool sameSecret(const uint8_t* a, const uint8_t* b) {
  uint8_t diff = 0;  // no early exit: the time taken says nothing about the secret
  for (int i = 0; i < 32; ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

Status openListener(const TransportContext& ctx, Socket* listener, SocketAddress* address) {
  std::vector<InterfaceAddress> interfaces;
  LANES_RETURN_IF_ERROR(findInterfaces(ctx.config.socketIfname, &interfaces));
  int family = ctx.bootstrap->id().family;
  auto it = std::find_if(interfaces.begin(), interfaces.end(),
                         [&](const InterfaceAddress& i) { return i.address.family() == family; });
  if (it == interfaces.end()) it = interfaces.begin();
  if (it == interfaces.end()) {
    return systemError("rank " + std::to_string(ctx.rank) +
                       ": no network interface for the socket transport matches "
                       "LANES_SOCKET_IFNAME; set it to an interface this host has");
  }
  *address = it->address;
  address->setPort(0);
  LANES_RETURN_IF_ERROR(
      Socket::listen(address, kMaxSockets * std::max(ctx.nranks, 1) + 16, listener));
  LANES_INFO(Transport, ctx.rank, "socket transport listens on %s (%s)",
             address->toString().c_str(), it->name.c_str());
  return Status::ok();
}

// A data connection accepted but not yet identified by its hello.
struct PendingHello {
  Socket sock;
  SocketAddress from;
  DataHello hello{};
  size_t got = 0;
  Deadline by = Deadline::never();
};

void refuseStranger(const TransportContext& ctx, const PendingHello& p, const char* why) {
  LANES_WARN(Transport, ctx.rank,
             "socket transport: refused a data connection from %s that is not of this "
             "communicator (%s)",
             p.from.toString().c_str(), why);
}

// Accepts `expected` sockets from lower peers. Hellos are read from every
// pending connection at once, so a stranger that connects and stays silent
// costs the real peers nothing (it is dropped after kHelloSeconds, or closed
// once every peer is in).
Status acceptFromLowerPeers(const TransportContext& ctx, const SocketConnectionConfig& cfg,
                            const DataHello& mine, const Socket& listener, Deadline deadline,
                            int expected, std::map<int, std::vector<Socket>>* sockets) {
  const UniqueIdData& id = ctx.bootstrap->id();
  const int nsockets = mine.sockets;
  std::vector<PendingHello> pending;
  std::vector<pollfd> fds;
  // Takes a complete hello: the peer's socket goes to its slot, or it is refused.
  auto identify = [&](PendingHello& p) -> Status {
    const DataHello& h = p.hello;
    bool ours = h.magic == kHelloMagic && h.version == kHelloVersion &&
                sameSecret(h.secret, id.secret) && h.commId == id.commId && h.dstRank == ctx.rank &&
                h.srcRank >= 0 && h.srcRank < ctx.rank && sockets->count(h.srcRank) != 0 &&
                h.socketIndex >= 0;
    if (!ours) {
      refuseStranger(ctx, p, "wrong hello, secret or rank");
      return Status::ok();
    }
    if (h.sockets != nsockets || h.lanes != cfg.lanes || h.bufferBytes != cfg.bufferBytes ||
        h.stripeBytes != cfg.stripeBytes) {
      return invalidUsage(
          "rank " + std::to_string(ctx.rank) + " and rank " + std::to_string(h.srcRank) +
          " disagree on the socket transport's settings (" + std::to_string(nsockets) + " vs " +
          std::to_string(h.sockets) + " sockets, " + std::to_string(cfg.bufferBytes) + " vs " +
          std::to_string(h.bufferBytes) + " ring bytes, " + std::to_string(cfg.stripeBytes) +
          " vs " + std::to_string(h.stripeBytes) +
          " stripe bytes); set LANES_SOCKET_NTHREADS, LANES_NSOCKS_PERTHREAD, "
          "LANES_SOCKET_RING_BYTES and LANES_SOCKET_STRIPE_BYTES alike on every rank");
    }
    auto& slot = (*sockets)[h.srcRank];
    if (h.socketIndex >= nsockets || slot[static_cast<size_t>(h.socketIndex)].valid()) {
      LANES_WARN(Transport, ctx.rank,
                 "socket transport: refused a duplicate data connection from %s",
                 p.from.toString().c_str());
      return Status::ok();
    }
    slot[static_cast<size_t>(h.socketIndex)] = std::move(p.sock);
    --expected;
    return Status::ok();
  };

  while (expected > 0) {
    if (deadline.expired()) {
      return timeoutError("rank " + std::to_string(ctx.rank) + ": " + std::to_string(expected) +
                          " data sockets from lower peers never arrived before the deadline");
    }
    // Short slices, so that a peer's reported failure ends the wait.
    if (ctx.checkAbort) LANES_RETURN_IF_ERROR(ctx.checkAbort());
    int waitMs = std::min(250, deadline.remainingMs());
    fds.assign(1, pollfd{listener.fd(), POLLIN, 0});
    for (const PendingHello& p : pending) {
      fds.push_back({p.sock.fd(), POLLIN, 0});
      waitMs = std::min(waitMs, p.by.remainingMs());
    }
    if (::poll(fds.data(), fds.size(), waitMs) < 0 && errno != EINTR)
      return systemError("socket transport: poll on the data listener failed: " + errnoText(errno));
    for (size_t i = pending.size(); i-- > 0;) {
      PendingHello& p = pending[i];
      bool done = false;
      if (fds[i + 1].revents != 0) {
        size_t n = 0;
        Status st = p.sock.tryRecv(reinterpret_cast<uint8_t*>(&p.hello) + p.got,
                                   sizeof(DataHello) - p.got, &n);
        p.got += n;
        if (!st.isOk()) {
          refuseStranger(ctx, p, "it closed the connection before a whole hello");
          done = true;
        } else if (p.got == sizeof(DataHello)) {
          LANES_RETURN_IF_ERROR(identify(p));
          done = true;
        }
      }
      if (!done && p.by.expired()) {
        refuseStranger(ctx, p, "it sent no hello in time");
        done = true;
      }
      if (done) pending.erase(pending.begin() + static_cast<long>(i));
    }
    if (fds[0].revents & POLLIN) {
      for (;;) {
        PendingHello p;
        Status st = listener.accept(Deadline::after(0), &p.sock, &p.from);
        if (st.code() == lanesTimeout) break;
        if (!st.isOk()) {
          return Status(st.code(),
                        "rank " + std::to_string(ctx.rank) +
                            ": accepting data sockets from lower peers: " + st.message());
        }
        p.by = Deadline::after(kHelloSeconds);
        if (deadline.at() < p.by.at()) p.by = deadline;
        pending.push_back(std::move(p));
      }
    }
  }
  for (const PendingHello& p : pending)
    refuseStranger(ctx, p, "it had sent no whole hello when every peer was connected");
  return Status::ok();
}

class SocketTransport final : public Transport {
 public:
  const char* name() const override { return "tcp"; }
  bool canConnect(const RankInfo&, const RankInfo&) const override { return true; }
  Status connect(const TransportContext& ctx, const std::vector<int>& peers,
                 std::vector<std::unique_ptr<Connection>>* out) override;
};

// Connects S sockets to each higher peer and accepts S from each lower one.
Status connectMesh(const TransportContext& ctx, const SocketConnectionConfig& cfg,
                   const std::vector<int>& peers, const std::vector<Endpoint>& endpoints,
                   const Socket& listener, Deadline deadline,
                   std::map<int, std::vector<Socket>>* sockets) {
  const UniqueIdData& id = ctx.bootstrap->id();
  const int nsockets = cfg.threads * cfg.socketsPerThread;
  DataHello mine{};
  mine.magic = kHelloMagic;
  mine.version = kHelloVersion;
  std::memcpy(mine.secret, id.secret, sizeof(mine.secret));
  mine.commId = id.commId;
  mine.srcRank = ctx.rank;
  mine.sockets = nsockets;
  mine.lanes = cfg.lanes;
  mine.bufferBytes = cfg.bufferBytes;
  mine.stripeBytes = cfg.stripeBytes;

  int expected = 0;
  for (int p : peers) {
    (*sockets)[p].resize(static_cast<size_t>(nsockets));
    if (p < ctx.rank) {
      expected += nsockets;
      continue;
    }
    const SocketAddress& to = endpoints[static_cast<size_t>(p)].address;
    for (int i = 0; i < nsockets; ++i) {
      Socket s;
      // Connect in short slices too: a failed peer never starts listening.
      Status st = timeoutError("not connected yet");
      while (!st.isOk() && !deadline.expired()) {
        if (ctx.checkAbort) {
          Status abort = ctx.checkAbort();
          if (!abort.isOk()) return abort;
        }
        Deadline slice = Deadline::after(0.25);
        if (deadline.at() < slice.at()) slice = deadline;
        st = Socket::connect(to, slice, &s);
        if (!st.isOk() && st.code() != lanesTimeout) break;
      }
      if (!st.isOk()) {
        return Status(st.code(), "rank " + std::to_string(ctx.rank) +
                                     ": data socket to peer rank " + std::to_string(p) + " at " +
                                     to.toString() + ": " + st.message());
      }
      DataHello hello = mine;
      hello.dstRank = p;
      hello.socketIndex = i;
      LANES_RETURN_IF_ERROR(s.sendAll(&hello, sizeof(hello), deadline));
      (*sockets)[p][static_cast<size_t>(i)] = std::move(s);
    }
  }

  return acceptFromLowerPeers(ctx, cfg, mine, listener, deadline, expected, sockets);
}

Status SocketTransport::connect(const TransportContext& ctx, const std::vector<int>& peers,
                                std::vector<std::unique_ptr<Connection>>* out) {
  if (ctx.bootstrap == nullptr || ctx.lanes <= 0 || ctx.lanes > 65535) {
    return invalidArgument("socket transport: connect needs a bootstrap and 1..65535 lanes");
  }
  Deadline deadline = Deadline::after(ctx.timeoutSeconds);
  const SocketConnectionConfig cfg = connectionConfig(ctx);

  // 1. Listen (only ranks with socket peers) and publish the address.
  Socket listener;
  std::vector<Endpoint> endpoints(static_cast<size_t>(ctx.nranks));
  Status local;
  if (!peers.empty()) {
    local = openListener(ctx, &listener, &endpoints[static_cast<size_t>(ctx.rank)].address);
  }
  LANES_RETURN_IF_ERROR(ctx.bootstrap->allGather(endpoints.data(), sizeof(Endpoint), deadline));
  LANES_RETURN_IF_ERROR(
      agreeOnStatus(*ctx.bootstrap, local, "open its socket transport listener", deadline));

  // 2. Connect up, accept from below.
  std::map<int, std::vector<Socket>> sockets;
  local = connectMesh(ctx, cfg, peers, endpoints, listener, deadline, &sockets);
  LANES_RETURN_IF_ERROR(agreeOnStatus(*ctx.bootstrap, local, "connect its data sockets", deadline));

  // 3. Start the workers.
  out->clear();
  for (int p : peers) {
    SocketConnectionConfig c = cfg;
    c.peer = p;
    c.peerAddress = endpoints[static_cast<size_t>(p)].address.toString();
    std::unique_ptr<Connection> conn;
    LANES_RETURN_IF_ERROR(makeSocketConnection(c, std::move(sockets[p]), &conn));
    out->push_back(std::move(conn));
  }
  LANES_INFO(Transport, ctx.rank,
             "tcp: connected %zu peers, %d threads x %d sockets each, %zu-byte stripes",
             peers.size(), cfg.threads, cfg.socketsPerThread, cfg.stripeBytes);
  return Status::ok();
}

}  // namespace

std::unique_ptr<Transport> makeSocketTransport() { return std::make_unique<SocketTransport>(); }

}  // namespace lanes
