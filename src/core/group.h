// lanesGroupStart/End: per-thread batching of calls, as NCCL's groups.
#pragma once

#include "core/execute.h"

namespace lanes {

bool inGroup();
// Queues the request in the open group, or runs it at once if none is open.
Status submit(Request request);

}  // namespace lanes
