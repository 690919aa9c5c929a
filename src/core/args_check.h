// Argument checks shared by every collective entry point. Each failure is a
// sentence naming the argument, its value and what the caller should do.
#pragma once

#include <cstddef>

#include "base/status.h"
#include "core/comm.h"

namespace lanes {

Status checkDatatype(lanesDataType_t type);
// Resolves a built-in or pre-multiplied-sum op of `comm`.
Status resolveRedOp(lanesComm* comm, lanesRedOp_t op, RedOp* out);
Status checkRank(const char* what, int value, int nranks);
// count * elemSize * multiplier must fit in size_t.
Status checkByteCount(const char* fn, size_t count, size_t elemSize, size_t multiplier,
                      size_t* bytes);
Status checkBuffer(const char* fn, const char* name, const void* ptr, size_t bytes);
// Buffers either are exactly the in-place layout (b == a + inPlaceOffset) or
// do not overlap at all; NCCL gives partial overlap no meaning.
Status checkAliasing(const char* fn, const void* a, size_t aBytes, const void* b, size_t bBytes,
                     size_t inPlaceOffset, bool inPlaceAllowed);

}  // namespace lanes
