// New communicators made over an existing one's control mesh (lanesCommSplit,
// lanesCommShrink): no launcher, id, socket or thread of their own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/status.h"
#include "core/comm.h"

namespace lanes {

// members: ranks of `parent`, in the new communicator's rank order; `me` is
// the caller's index there. members[0] takes a fresh channel of the parent's
// control mesh and sends its number to the others, who wait for it until
// `deadline`. `agreement` travels with it: a receiver whose value differs
// was asked for another communicator than the sender's and gets
// lanesInvalidUsage. `what` starts every error sentence ("lanesCommSplit").
// Then every member joins the new communicator on that channel.
Status initChildComm(lanesComm* parent, const std::vector<int>& members, int me, uint32_t tag,
                     uint64_t agreement, Deadline deadline, const std::string& what,
                     const CommOptions& options, lanesComm_t* out);

}  // namespace lanes
