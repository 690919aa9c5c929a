// Collectives, send/recv, groups, reduction ops and memory of the NCCL API, on
// Lanes. NCCL's argument order, in-place rules and stream semantics are
// Lanes' own, so each call passes straight through.
#include "compat/nccl_convert.h"
#include "core/errors.h"

using namespace lanes;
using namespace lanes::compat;

#pragma GCC visibility push(default)
extern "C" {

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return toNccl(lanesAllReduce(sendbuff, recvbuff, count, toLanes(datatype), toLanes(op),
                               toLanes(comm), stream));
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return toNccl(
      lanesBroadcast(sendbuff, recvbuff, count, toLanes(datatype), root, toLanes(comm), stream));
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return toNccl(lanesReduce(sendbuff, recvbuff, count, toLanes(datatype), toLanes(op), root,
                            toLanes(comm), stream));
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return toNccl(
      lanesAllGather(sendbuff, recvbuff, sendcount, toLanes(datatype), toLanes(comm), stream));
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  return toNccl(lanesReduceScatter(sendbuff, recvbuff, recvcount, toLanes(datatype), toLanes(op),
                                   toLanes(comm), stream));
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return toNccl(lanesAlltoAll(sendbuff, recvbuff, count, toLanes(datatype), toLanes(comm), stream));
}

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return toNccl(
      lanesGather(sendbuff, recvbuff, count, toLanes(datatype), root, toLanes(comm), stream));
}

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return toNccl(
      lanesScatter(sendbuff, recvbuff, count, toLanes(datatype), root, toLanes(comm), stream));
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return toNccl(lanesSend(sendbuff, count, toLanes(datatype), peer, toLanes(comm), stream));
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return toNccl(lanesRecv(recvbuff, count, toLanes(datatype), peer, toLanes(comm), stream));
}

ncclResult_t ncclGroupStart() { return toNccl(lanesGroupStart()); }
ncclResult_t ncclGroupEnd() { return toNccl(lanesGroupEnd()); }

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  constexpr unsigned kNcclSimInfoMagic = 0x74685283;
  if (simInfo == nullptr) return ncclGroupEnd();  // as NCCL: nothing to fill, so run it
  const bool valid = simInfo != nullptr && simInfo->magic == kNcclSimInfoMagic &&
                     simInfo->size >= sizeof(ncclSimInfo_t);
  // The group ends whether or not simInfo is usable, as in NCCL.
  lanesSimInfo_t info = LANES_SIM_INFO_INITIALIZER;
  lanesResult_t r = lanesGroupSimulateEnd(&info);
  if (r != lanesSuccess) return toNccl(r);
  if (!valid)
    return toNccl(report(nullptr, invalidArgument("ncclGroupSimulateEnd: simInfo was not "
                                                  "initialised with "
                                                  "NCCL_SIM_INFO_INITIALIZER")));
  simInfo->estimatedTime = info.estimatedTime;
  return ncclSuccess;
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  static_assert(int(ncclScalarDevice) == int(lanesScalarDevice) &&
                int(ncclScalarHostImmediate) == int(lanesScalarHostImmediate));
  return toNccl(lanesRedOpCreatePreMulSum(reinterpret_cast<lanesRedOp_t*>(op), scalar,
                                          toLanes(datatype), toLanes(residence), toLanes(comm)));
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  return toNccl(lanesRedOpDestroy(toLanes(op), toLanes(comm)));
}

ncclResult_t ncclMemAlloc(void** ptr, size_t size) { return toNccl(lanesMemAlloc(ptr, size)); }
ncclResult_t ncclMemFree(void* ptr) { return toNccl(lanesMemFree(ptr)); }

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return toNccl(lanesCommRegister(toLanes(comm), buff, size, handle));
}
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  return toNccl(lanesCommDeregister(toLanes(comm), handle));
}
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int winFlags) {
  return toNccl(lanesCommWindowRegister(toLanes(comm), buff, size,
                                        reinterpret_cast<lanesWindow_t*>(win), winFlags));
}
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  return toNccl(lanesCommWindowDeregister(toLanes(comm), reinterpret_cast<lanesWindow_t>(win)));
}

// NCCL's device-initiated API (nccl_device.h) needs NCCL's device runtime;
// the types stay opaque here because that header needs a CUDA compiler.
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void* /*reqs*/, void* /*outDevComm*/) {
  return toNccl(
      report(toLanes(comm), invalidUsage("ncclDevCommCreate: Lanes does not offer device-initiated "
                                         "communication (NCCL's device API); use the host-side "
                                         "collectives and send/recv, which all work")));
}
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const void* /*devComm*/) {
  return toNccl(report(toLanes(comm),
                       invalidUsage("ncclDevCommDestroy: Lanes does not offer device-initiated "
                                    "communication, so no device communicator exists")));
}

}  // extern "C"

LANES_NCCL_ALIAS(ncclAllReduce);
LANES_NCCL_ALIAS(ncclBroadcast);
LANES_NCCL_ALIAS(ncclBcast);
LANES_NCCL_ALIAS(ncclReduce);
LANES_NCCL_ALIAS(ncclAllGather);
LANES_NCCL_ALIAS(ncclReduceScatter);
LANES_NCCL_ALIAS(ncclAlltoAll);
LANES_NCCL_ALIAS(ncclGather);
LANES_NCCL_ALIAS(ncclScatter);
LANES_NCCL_ALIAS(ncclSend);
LANES_NCCL_ALIAS(ncclRecv);
LANES_NCCL_ALIAS(ncclGroupStart);
LANES_NCCL_ALIAS(ncclGroupEnd);
LANES_NCCL_ALIAS(ncclGroupSimulateEnd);
LANES_NCCL_ALIAS(ncclRedOpCreatePreMulSum);
LANES_NCCL_ALIAS(ncclRedOpDestroy);
LANES_NCCL_ALIAS(ncclMemAlloc);
LANES_NCCL_ALIAS(ncclMemFree);
LANES_NCCL_ALIAS(ncclCommRegister);
LANES_NCCL_ALIAS(ncclCommDeregister);
LANES_NCCL_ALIAS(ncclCommWindowRegister);
LANES_NCCL_ALIAS(ncclCommWindowDeregister);
LANES_NCCL_ALIAS(ncclDevCommCreate);
LANES_NCCL_ALIAS(ncclDevCommDestroy);
#pragma GCC visibility pop
