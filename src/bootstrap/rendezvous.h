// The two steps that turn a unique id into a mesh of control connections:
// meet at the root to learn every rank's listen address, then connect every
// pair of ranks. Internal to src/bootstrap.
#pragma once

#include <vector>

#include "base/socket.h"
#include "bootstrap/bootstrap.h"

namespace lanes {

// Opens this rank's listener (on the interface that reaches the root, or the
// first LANES_SOCKET_IFNAME match of the root's family), presents the secret
// to the root and receives the table: ranks[i] and listens[i] for every rank.
Status joinRoot(const UniqueIdData& id, int nranks, const RankInfo& self, Deadline deadline,
                Socket* listener, std::vector<RankInfo>* ranks,
                std::vector<SocketAddress>* listens);

// Rank i connects to every j < i and accepts every j > i; both sides prove
// they know the secret. peers[i] is the connection to rank i (self: empty).
Status buildMesh(const UniqueIdData& id, int rank, const std::vector<RankInfo>& ranks,
                 const std::vector<SocketAddress>& listens, const Socket& listener,
                 Deadline deadline, std::vector<Socket>* peers);

}  // namespace lanes
