#include "bootstrap/rendezvous.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>

#include "base/env.h"
#include "base/log.h"
#include "bootstrap/wire.h"

namespace lanes {
namespace {

Status listenAddressFor(const UniqueIdData& id, const Socket& rootConn, SocketAddress* out) {
  if (auto spec = envString("LANES_SOCKET_IFNAME")) {
    std::vector<InterfaceAddress> ifs;
    LANES_RETURN_IF_ERROR(findInterfaces(*spec, &ifs));
    for (const auto& ia : ifs)
      if (ia.address.family() == id.family) {
        *out = ia.address;
        return Status::ok();
      }
    return invalidArgument("no interface matching LANES_SOCKET_IFNAME=" + *spec +
                           " has an address of the root's family (" +
                           (id.family == AF_INET ? "IPv4" : "IPv6") + ")");
  }
  // The address this host used to reach the root is one the others can reach.
  LANES_RETURN_IF_ERROR(rootConn.localAddress(out));
  out->setPort(0);
  return Status::ok();
}

}  // namespace

Status joinRoot(const UniqueIdData& id, int nranks, const RankInfo& self, Deadline deadline,
                Socket* listener, std::vector<RankInfo>* ranks,
                std::vector<SocketAddress>* listens) {
  const SocketAddress root = wire::rootAddress(id);
  const std::string who = "rank " + std::to_string(self.rank);
  Socket conn;
  Status st = Socket::connect(root, deadline, &conn);
  if (!st.isOk())
    return Status(st.code(), who + " could not reach the bootstrap root at " + root.toString() +
                                 ": " + st.message() +
                                 " (the root runs in the process that created the unique id)");

  SocketAddress listenAddr;
  LANES_RETURN_IF_ERROR(listenAddressFor(id, conn, &listenAddr));
  LANES_RETURN_IF_ERROR(Socket::listen(&listenAddr, SOMAXCONN, listener));

  wire::Hello h;
  std::copy(id.secret, id.secret + sizeof(id.secret), h.secret);
  h.commId = id.commId;
  h.nranks = nranks;
  h.rank = self.rank;
  h.info = self;
  h.listen = listenAddr;
  auto hello = wire::encodeHello(h, /*toRoot=*/true);
  st = sendFrame(conn, wire::kHello, 0, hello.data(), hello.size(), deadline);
  if (!st.isOk())
    return Status(st.code(), who + " could not greet the bootstrap root: " + st.message());

  uint16_t type = 0;
  uint32_t tag = 0;
  std::vector<uint8_t> payload;
  st = recvFrame(conn, &type, &tag, &payload,
                 std::max(wire::maxTableBytes(nranks), wire::kMaxErrorBytes), deadline);
  if (!st.isOk()) {
    std::string hint;
    if (st.code() == lanesTimeout)
      hint = " (not every rank arrived: check that all " + std::to_string(nranks) +
             " ranks started with the same unique id)";
    else if (st.code() == lanesRemoteError)
      hint =
          " (the process running the root, rank 0 under a launcher, exited or gave up: its "
          "own error says why)";
    return Status(st.code(), who + " did not get the rank table from the bootstrap root at " +
                                 root.toString() + ": " + st.message() + hint);
  }
  if (type == wire::kError) {
    Status err = wire::decodeError(payload);
    // The root's sentence names every rank concerned (also this one when it
    // arrived first and a later rank made the rendezvous fail).
    return Status(err.code(), who + " could not join the communicator: " + err.message());
  }
  if (type != wire::kTable)
    return internalError(who + " got an unexpected frame of type " + std::to_string(type) +
                         " from the bootstrap root");
  LANES_RETURN_IF_ERROR(wire::decodeTable(payload, nranks, ranks, listens));
  LANES_INFO(Bootstrap, self.rank, "rendezvous done: %d ranks, listening on %s", nranks,
             listenAddr.toString().c_str());
  return Status::ok();
}

namespace {

// Unidentified connections a rank's control listener holds at once.
constexpr size_t kMaxPendingConnections = 1024;

wire::Hello meshHello(const UniqueIdData& id, int nranks, int rank) {
  wire::Hello h;
  std::copy(id.secret, id.secret + sizeof(id.secret), h.secret);
  h.commId = id.commId;
  h.nranks = nranks;
  h.rank = rank;
  return h;
}

// Checks a mesh hello; an error says why the connection is refused.
Status checkMeshHello(const UniqueIdData& id, int nranks, const std::vector<uint8_t>& payload,
                      uint16_t type, wire::Hello* h) {
  if (type != wire::kHello)
    return invalidArgument("its first frame was of type " + std::to_string(type) + ", not a hello");
  LANES_RETURN_IF_ERROR(wire::decodeHello(payload, /*toRoot=*/false, h));
  if (!wire::constantTimeEqual(h->secret, id.secret, sizeof(id.secret)))
    return invalidArgument("it presented the wrong secret");
  if (h->commId != id.commId || h->nranks != nranks)
    return invalidArgument("it belongs to another communicator");
  return Status::ok();
}

}  // namespace

Status buildMesh(const UniqueIdData& id, int rank, const std::vector<RankInfo>& ranks,
                 const std::vector<SocketAddress>& listens, const Socket& listener,
                 Deadline deadline, std::vector<Socket>* peers) {
  const int nranks = static_cast<int>(ranks.size());
  peers->clear();
  peers->resize(static_cast<size_t>(nranks));
  const auto mine = wire::encodeHello(meshHello(id, nranks, rank), false);

  // Lower ranks are already accepting (they connected to theirs first).
  for (int j = 0; j < rank; ++j) {
    const std::string peer = wire::describeRank(ranks[static_cast<size_t>(j)]);
    Socket s;
    Status st = Socket::connect(listens[static_cast<size_t>(j)], deadline, &s);
    if (st.isOk()) st = sendFrame(s, wire::kHello, 0, mine.data(), mine.size(), deadline);
    uint16_t type = 0;
    uint32_t tag = 0;
    std::vector<uint8_t> reply;
    if (st.isOk()) st = recvFrame(s, &type, &tag, &reply, wire::kMaxHelloBytes, deadline);
    wire::Hello h;
    if (st.isOk()) st = checkMeshHello(id, nranks, reply, type, &h);
    if (st.isOk() && h.rank != j)
      st = invalidArgument("the process there says it is rank " + std::to_string(h.rank));
    if (!st.isOk())
      return Status(st.code() == lanesInvalidArgument ? lanesRemoteError : st.code(),
                    "rank " + std::to_string(rank) + " could not open its control connection to " +
                        peer + " at " + listens[static_cast<size_t>(j)].toString() + ": " +
                        st.message());
    (*peers)[static_cast<size_t>(j)] = std::move(s);
  }

  // Accept from higher ranks. Every unidentified connection waits in
  // `pending` with its own hello deadline, read without blocking, so a stranger
  // that sends nothing or trickles bytes cannot hold up the real ranks.
  struct Pending {
    Socket sock;
    FrameReader reader;
    Deadline helloBy;
  };
  std::vector<Pending> pending;
  int missing = nranks - 1 - rank;
  auto missingList = [&] {
    std::string list;
    for (int j = rank + 1; j < nranks; ++j)
      if (!(*peers)[static_cast<size_t>(j)].valid())
        list += (list.empty() ? "" : ", ") + std::to_string(j);
    return list;
  };
  // Checks a complete hello from a pending connection; OK means `h.rank` is a
  // new higher rank and has been answered.
  auto admit = [&](Pending& p, wire::Hello* h) {
    LANES_RETURN_IF_ERROR(
        checkMeshHello(id, nranks, p.reader.payload(), p.reader.header().type, h));
    if (h->rank <= rank || h->rank >= nranks)
      return invalidArgument("it claims rank " + std::to_string(h->rank) +
                             ", which does not connect to this rank");
    if ((*peers)[static_cast<size_t>(h->rank)].valid())
      return invalidArgument("rank " + std::to_string(h->rank) + " is already connected");
    return sendFrame(p.sock, wire::kHello, 0, mine.data(), mine.size(), p.helloBy);
  };
  while (missing > 0) {
    if (deadline.expired())
      return timeoutError("rank " + std::to_string(rank) +
                          " timed out waiting for control connections from ranks " + missingList() +
                          " (LANES_BOOTSTRAP_TIMEOUT)");
    std::vector<pollfd> fds{{listener.fd(), POLLIN, 0}};
    int waitMs = deadline.remainingMs();
    for (const Pending& p : pending) {
      fds.push_back({p.sock.fd(), POLLIN, 0});
      waitMs = std::min(waitMs, p.helloBy.remainingMs());
    }
    if (::poll(fds.data(), fds.size(), waitMs) < 0 && errno != EINTR)
      return systemError("rank " + std::to_string(rank) +
                         ": poll on the control listener failed: " + errnoText(errno));
    for (size_t i = pending.size(); i-- > 0;) {
      Pending& p = pending[i];
      bool complete = false;
      Status st;
      if (fds[i + 1].revents != 0)
        st = p.reader.readSome(p.sock, wire::kMaxHelloBytes, &complete);
      else if (p.helloBy.expired())
        st = timeoutError("it sent no hello within " +
                          std::to_string(static_cast<int>(wire::kHelloTimeoutSeconds)) + " s");
      if (st.isOk() && !complete) continue;
      wire::Hello h;
      if (st.isOk()) st = admit(p, &h);
      if (st.isOk()) {
        (*peers)[static_cast<size_t>(h.rank)] = std::move(p.sock);
        --missing;
      } else {
        LANES_WARN(Bootstrap, rank,
                   "dropped control connection from %s: %s (not a rank of this communicator)",
                   p.sock.peerName().c_str(), st.message().c_str());
      }
      pending.erase(pending.begin() + static_cast<long>(i));
    }
    if (!(fds[0].revents & POLLIN)) continue;
    for (;;) {
      Socket s;
      Status accepted = listener.accept(Deadline::after(0), &s);
      // Out of descriptors (or another local failure): waiting cannot help,
      // and the connection left in the backlog would spin this loop.
      if (!accepted.isOk() && accepted.code() != lanesTimeout)
        return Status(accepted.code(),
                      "rank " + std::to_string(rank) +
                          " could not accept a control connection: " + accepted.message());
      if (!accepted.isOk()) break;
      if (pending.size() >= kMaxPendingConnections) {
        LANES_WARN(Bootstrap, rank, "too many unidentified control connections; dropped %s",
                   s.peerName().c_str());
        continue;
      }
      Deadline helloBy = Deadline::after(wire::kHelloTimeoutSeconds);
      if (deadline.at() < helloBy.at()) helloBy = deadline;
      pending.push_back(Pending{std::move(s), {}, helloBy});
    }
  }
  return Status::ok();
}

}  // namespace lanes
