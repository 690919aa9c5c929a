#include "core/args_check.h"

#include <cstdint>
#include <limits>
#include <string>

namespace lanes {

Status checkDatatype(lanesDataType_t type) {
  if (datatypeSize(type) == 0)
    return invalidArgument("datatype " + std::to_string(static_cast<int>(type)) +
                           " is not a lanesDataType_t (valid: 0.." +
                           std::to_string(lanesNumTypes - 1) + ")");
  return Status::ok();
}

Status resolveRedOp(lanesComm* comm, lanesRedOp_t op, RedOp* out) {
  int v = static_cast<int>(op);
  if (v >= 0 && v < lanesNumOps) {
    out->kind = static_cast<RedOpKind>(v);
    out->scalar = 1.0;
    return Status::ok();
  }
  if (v >= lanesNumOps) {
    std::lock_guard<std::mutex> lock(comm->opsMutex);
    size_t idx = static_cast<size_t>(v - lanesNumOps);
    if (idx < comm->userOps.size() && comm->userOpLive[idx]) {
      *out = comm->userOps[idx];
      return Status::ok();
    }
  }
  return invalidArgument("reduction op " + std::to_string(v) +
                         " is neither a built-in op (sum, prod, max, min, avg) nor a live op "
                         "created on this communicator by lanesRedOpCreatePreMulSum");
}

Status checkRank(const char* what, int value, int nranks) {
  if (value < 0 || value >= nranks)
    return invalidArgument(std::string(what) + " " + std::to_string(value) +
                           " is out of range: the communicator has ranks 0.." +
                           std::to_string(nranks - 1));
  return Status::ok();
}

Status checkByteCount(const char* fn, size_t count, size_t elemSize, size_t multiplier,
                      size_t* bytes) {
  size_t max = std::numeric_limits<size_t>::max();
  if (elemSize != 0 && multiplier != 0 && count > max / elemSize / multiplier)
    return invalidArgument(std::string(fn) + ": count " + std::to_string(count) +
                           " overflows the byte size of the buffers");
  *bytes = count * elemSize * multiplier;
  if (*bytes > (static_cast<size_t>(1) << 62))
    return invalidArgument(std::string(fn) + ": count " + std::to_string(count) +
                           " asks for more than 2^62 bytes");
  return Status::ok();
}

Status checkBuffer(const char* fn, const char* name, const void* ptr, size_t bytes) {
  if (ptr == nullptr && bytes > 0)
    return invalidArgument(std::string(fn) + ": " + name + " is NULL but " + std::to_string(bytes) +
                           " bytes are to be accessed");
  return Status::ok();
}

Status checkAliasing(const char* fn, const void* a, size_t aBytes, const void* b, size_t bBytes,
                     size_t inPlaceOffset, bool inPlaceAllowed) {
  if (a == nullptr || b == nullptr || aBytes == 0 || bBytes == 0) return Status::ok();
  auto pa = reinterpret_cast<uintptr_t>(a);
  auto pb = reinterpret_cast<uintptr_t>(b);
  bool overlap = pa < pb + bBytes && pb < pa + aBytes;
  if (!overlap) return Status::ok();
  if (inPlaceAllowed && (pb == pa + inPlaceOffset || pa == pb + inPlaceOffset)) return Status::ok();
  std::string where = inPlaceAllowed
                          ? " partially; pass exactly the in-place position (offset " +
                                std::to_string(inPlaceOffset) + " bytes) or disjoint buffers"
                          : "; this operation has no in-place form, use disjoint buffers";
  return invalidArgument(std::string(fn) + ": sendbuff and recvbuff overlap" + where);
}

}  // namespace lanes
