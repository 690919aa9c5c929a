// The meeting at the root that turns a unique id into every rank's identity
// and control listen address; connections between ranks open later, when a
// pair first talks (ControlMesh). Internal to src/bootstrap.
#pragma once

#include <vector>

#include "base/socket.h"
#include "bootstrap/bootstrap.h"

namespace lanes {

// Opens this rank's listener (on the interface that reaches the root, or the
// first LANES_SOCKET_IFNAME match of the root's family), presents the secret
// to the root and receives its part of the table: ranks[i] and listens[i]
// for itself and its tree neighbours (channel_tree.h); the others' entries
// are RankInfo{} until the ranks gather them (Bootstrap::create).
Status joinRoot(const UniqueIdData& id, int nranks, const RankInfo& self, Deadline deadline,
                Socket* listener, std::vector<RankInfo>* ranks,
                std::vector<SocketAddress>* listens);

}  // namespace lanes
