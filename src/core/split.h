// New communicators made over an existing one's control mesh (lanesCommSplit,
// lanesCommShrink): no launcher or out-of-band id exchange is needed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/status.h"
#include "core/comm.h"

namespace lanes {

// members: ranks of `parent`, in the new communicator's rank order; `me` is
// the caller's index there. members[0] creates a fresh id (and its root) and
// sends it to the others, who wait for it until `deadline`. `agreement`
// travels with the id: a receiver whose value differs was asked for another
// communicator than the sender's and gets lanesInvalidUsage. `what` starts
// every error sentence ("lanesCommSplit").
Status shareNewCommId(lanesComm* parent, const std::vector<int>& members, int me, uint32_t tag,
                      uint64_t agreement, Deadline deadline, const std::string& what,
                      lanesUniqueId* id);

}  // namespace lanes
