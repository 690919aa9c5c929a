#include "bootstrap/rendezvous.h"

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
                 std::max(wire::maxTableBytes(wire::kMaxTableEntries), wire::kMaxErrorBytes),
                 deadline);
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

}  // namespace lanes
