// Running a batch of requests: the core's entry to the executors.
#pragma once

#include <vector>

#include "base/status.h"
#include "exec/request.h"

namespace lanes {

// Runs requests issued together (a group, or one call): host buffers to
// completion, device buffers enqueued on their streams.
Status executeRequests(std::vector<Request>& requests);
// Runs requests on host buffers to completion (also the device proxy's engine).
Status executeHostRequests(std::vector<Request>& requests);

}  // namespace lanes
