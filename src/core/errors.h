// Turning internal Status into C API results, recording the sentence that
// lanesGetLastError shows.
#pragma once

#include "base/status.h"
#include "lanes/lanes.h"

namespace lanes {

// Records `status` as the last error of `comm` (or of this thread when comm
// is null) and returns its code. OK passes through untouched.
lanesResult_t report(lanesComm_t comm, const Status& status);
const char* lastErrorText(lanesComm_t comm);
// The error of a call `fn` given a handle that is not a live communicator.
Status notLive(const char* fn);

}  // namespace lanes
