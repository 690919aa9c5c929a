// lanesRedOpCreatePreMulSum / lanesRedOpDestroy.
#include <cstring>

#include "core/args_check.h"
#include "core/comm_registry.h"
#include "core/errors.h"
#include "exec/device_path.h"
#include "kernels/cpu/reduce.h"

using namespace lanes;

namespace {

// Reads one value of `type` at `p` as double.
double scalarValue(const void* p, lanesDataType_t type) {
  switch (type) {
    case lanesInt8:
      return *static_cast<const int8_t*>(p);
    case lanesUint8:
      return *static_cast<const uint8_t*>(p);
    case lanesInt32:
      return *static_cast<const int32_t*>(p);
    case lanesUint32:
      return *static_cast<const uint32_t*>(p);
    case lanesInt64:
      return static_cast<double>(*static_cast<const int64_t*>(p));
    case lanesUint64:
      return static_cast<double>(*static_cast<const uint64_t*>(p));
    case lanesFloat16:
      return cpu::halfToFloat(*static_cast<const uint16_t*>(p));
    case lanesFloat32:
      return *static_cast<const float*>(p);
    case lanesFloat64:
      return *static_cast<const double*>(p);
    case lanesBfloat16:
      return cpu::bf16ToFloat(*static_cast<const uint16_t*>(p));
    case lanesFloat8e4m3:
      return cpu::e4m3ToFloat(*static_cast<const uint8_t*>(p));
    case lanesFloat8e5m2:
      return cpu::e5m2ToFloat(*static_cast<const uint8_t*>(p));
    default:
      return 0;
  }
}

}  // namespace

extern "C" {

lanesResult_t lanesRedOpCreatePreMulSum(lanesRedOp_t* op, void* scalar, lanesDataType_t datatype,
                                        lanesScalarResidence_t residence, lanesComm_t comm) {
  CommRef ref(comm);
  if (!ref)
    return report(nullptr, invalidArgument("lanesRedOpCreatePreMulSum: comm is NULL or not live"));
  Status status = [&]() -> Status {
    if (op == nullptr) return invalidArgument("lanesRedOpCreatePreMulSum: op is NULL");
    if (scalar == nullptr) return invalidArgument("lanesRedOpCreatePreMulSum: scalar is NULL");
    LANES_RETURN_IF_ERROR(checkDatatype(datatype));
    if (residence != lanesScalarDevice && residence != lanesScalarHostImmediate)
      return invalidArgument(
          "lanesRedOpCreatePreMulSum: residence must be lanesScalarDevice or "
          "lanesScalarHostImmediate");
    // Host-memory collectives read the scalar now; a device-resident scalar
    // on a host-only communicator lives in host memory too.
    // The scalar is read now, also when it lives on the GPU (NCCL reads a
    // device scalar at each launch; Lanes documents the difference).
    uint64_t value = 0;
    LANES_RETURN_IF_ERROR(copyToHost(&value, scalar, datatypeSize(datatype)));
    RedOp r;
    r.kind = RedOpKind::PreMulSum;
    r.scalar = scalarValue(&value, datatype);
    std::lock_guard<std::mutex> lock(comm->opsMutex);
    size_t idx = 0;
    while (idx < comm->userOpLive.size() && comm->userOpLive[idx]) ++idx;
    if (idx == comm->userOps.size()) {
      comm->userOps.push_back(r);
      comm->userOpLive.push_back(true);
    } else {
      comm->userOps[idx] = r;
      comm->userOpLive[idx] = true;
    }
    *op = static_cast<lanesRedOp_t>(lanesNumOps + static_cast<int>(idx));
    return Status::ok();
  }();
  return report(comm, status);
}

lanesResult_t lanesRedOpDestroy(lanesRedOp_t op, lanesComm_t comm) {
  CommRef ref(comm);
  if (!ref) return report(nullptr, invalidArgument("lanesRedOpDestroy: comm is NULL or not live"));
  int v = static_cast<int>(op);
  std::lock_guard<std::mutex> lock(comm->opsMutex);
  size_t idx = static_cast<size_t>(v - lanesNumOps);
  if (v < lanesNumOps || idx >= comm->userOps.size() || !comm->userOpLive[idx])
    return report(comm, invalidArgument("lanesRedOpDestroy: op " + std::to_string(v) +
                                        " was not created by lanesRedOpCreatePreMulSum on "
                                        "this communicator (or was already destroyed)"));
  comm->userOpLive[idx] = false;
  return lanesSuccess;
}

}  // extern "C"
