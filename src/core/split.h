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

// For a new communicator whose members cannot run a collective of the
// parent together (lanesCommShrink): members[0] (ranks of `parent`, in the
// new rank order; `me` is the caller's index) takes a fresh channel of the
// parent's control mesh and sends its number to the others, who wait for it
// until `deadline`. `agreement` travels with it: a receiver whose value
// differs was asked for another communicator than the sender's and gets
// lanesInvalidUsage. `what` starts every error sentence ("lanesCommShrink").
Status handOutChannel(lanesComm* parent, const std::vector<int>& members, int me, uint32_t tag,
                      uint64_t agreement, Deadline deadline, const std::string& what,
                      uint32_t* channel);

// Every member joins the new communicator on `channel` of the parent's mesh.
Status initChildComm(lanesComm* parent, const std::vector<int>& members, int me, uint32_t channel,
                     const CommOptions& options, lanesComm_t* out);

}  // namespace lanes
