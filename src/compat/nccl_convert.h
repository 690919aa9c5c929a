// NCCL's types to Lanes' and back. Both follow one ABI (same enum values, same
// id size), which the static_asserts below pin down; only the handles change
// name and the result codes differ past ncclInProgress.
#pragma once

#include <nccl.h>

#include <cstring>

#include "base/status.h"
#include "lanes/lanes.h"

namespace lanes::compat {

static_assert(sizeof(ncclUniqueId) == sizeof(lanesUniqueId));
static_assert(int(ncclInt8) == int(lanesInt8) && int(ncclUint8) == int(lanesUint8) &&
              int(ncclInt32) == int(lanesInt32) && int(ncclUint32) == int(lanesUint32) &&
              int(ncclInt64) == int(lanesInt64) && int(ncclUint64) == int(lanesUint64) &&
              int(ncclFloat16) == int(lanesFloat16) && int(ncclFloat32) == int(lanesFloat32) &&
              int(ncclFloat64) == int(lanesFloat64) && int(ncclBfloat16) == int(lanesBfloat16) &&
              int(ncclFloat8e4m3) == int(lanesFloat8e4m3) &&
              int(ncclFloat8e5m2) == int(lanesFloat8e5m2) &&
              int(ncclNumTypes) == int(lanesNumTypes));
static_assert(int(ncclSum) == int(lanesSum) && int(ncclProd) == int(lanesProd) &&
              int(ncclMax) == int(lanesMax) && int(ncclMin) == int(lanesMin) &&
              int(ncclAvg) == int(lanesAvg) && int(ncclNumOps) == int(lanesNumOps));
static_assert(int(ncclSuccess) == int(lanesSuccess) &&
              int(ncclUnhandledCudaError) == int(lanesUnhandledCudaError) &&
              int(ncclSystemError) == int(lanesSystemError) &&
              int(ncclInternalError) == int(lanesInternalError) &&
              int(ncclInvalidArgument) == int(lanesInvalidArgument) &&
              int(ncclInvalidUsage) == int(lanesInvalidUsage) &&
              int(ncclRemoteError) == int(lanesRemoteError) &&
              int(ncclInProgress) == int(lanesInProgress));
static_assert(NCCL_SPLIT_NOCOLOR == LANES_SPLIT_NOCOLOR);
static_assert(NCCL_SHRINK_DEFAULT == LANES_SHRINK_DEFAULT &&
              NCCL_SHRINK_ABORT == LANES_SHRINK_ABORT);

// NCCL has no timeout code: a wait that timed out is a peer that did not come,
// which NCCL reports as a remote error.
inline ncclResult_t toNccl(lanesResult_t r) {
  return r == lanesTimeout ? ncclRemoteError : static_cast<ncclResult_t>(r);
}
inline lanesComm_t toLanes(ncclComm_t c) { return reinterpret_cast<lanesComm_t>(c); }
inline ncclComm_t toNccl(lanesComm_t c) { return reinterpret_cast<ncclComm_t>(c); }
// NCCL's enums have no fixed underlying type, so in C++ a value outside their
// range (which a C caller may pass, and Lanes must refuse) may not be read as
// the enum: these take the argument by reference and copy its bits.
template <typename E>
int rawValue(const E& e) {
  static_assert(sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}
inline lanesDataType_t toLanes(const ncclDataType_t& t) {
  return static_cast<lanesDataType_t>(rawValue(t));
}
inline lanesRedOp_t toLanes(const ncclRedOp_t& op) {
  return static_cast<lanesRedOp_t>(rawValue(op));
}
inline lanesScalarResidence_t toLanes(const ncclScalarResidence_t& r) {
  return static_cast<lanesScalarResidence_t>(rawValue(r));
}

// ncclConfig_t into lanesConfig_t (`in` may be NULL: *out then stays the
// defaults and *use is false). Fields that mean nothing to Lanes are accepted
// and named once at INFO.
Status toLanesConfig(const ncclConfig_t* in, lanesConfig_t* out);

// Once per process, at the first communicator: the version line NCCL prints.
void announce();

}  // namespace lanes::compat

// pnccl*: NCCL's profiling aliases, the same function under a second name.
#define LANES_NCCL_ALIAS(fn) extern "C" decltype(fn) p##fn __attribute__((alias(#fn)))
