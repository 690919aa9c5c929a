// LANES_CHECK_MISMATCH=1: before a group runs, the ranks compare what they
// called over the bootstrap control mesh, so a mismatch (all-reduce against
// broadcast, different counts, datatypes, ops or roots) fails on every rank
// with lanesInvalidUsage naming both calls, instead of hanging or moving
// wrong bytes. Costs one small control message per peer and group.
//
// Collectives: every rank sends the list of its group's collectives to every
// other and all compare the full set, so all reach the same verdict and the
// communicator stays usable. Send/recv: each pair of ranks that address each
// other in a group swaps its lists; the i-th send of one side must match the
// i-th receive of the other in count and datatype (so, under the check,
// matching sends and receives must be posted in groups of the same shape).
#pragma once

#include <vector>

#include "base/status.h"
#include "exec/request.h"

namespace lanes {

// Checks the requests of every communicator that has the check on; OK when
// they match (or no communicator checks).
Status checkCallsMatch(const std::vector<Request>& requests);

}  // namespace lanes
