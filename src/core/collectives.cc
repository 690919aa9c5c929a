// The collective and point-to-point entry points: check, then submit.
#include "core/args_check.h"
#include "core/comm_registry.h"
#include "core/errors.h"
#include "core/group.h"
#include "core/init.h"
#include "exec/device_path.h"

using namespace lanes;

namespace {

struct CollCall {
  const char* fn;
  CollType coll;
  const void* send;
  void* recv;
  size_t count;
  lanesDataType_t type;
  lanesRedOp_t op;  // lanesSum for collectives without one
  int root;         // 0 for rootless collectives
};

// Bytes of the send and receive buffers of this rank, and the in-place offset.
struct Layout {
  size_t sendBytes = 0, recvBytes = 0, inPlaceOffset = 0;
  bool inPlaceAllowed = true;
};

Status layoutOf(const CollCall& c, int rank, int nranks, Layout* out) {
  size_t one = 0, all = 0;
  size_t elem = datatypeSize(c.type);
  LANES_RETURN_IF_ERROR(checkByteCount(c.fn, c.count, elem, 1, &one));
  LANES_RETURN_IF_ERROR(checkByteCount(c.fn, c.count, elem, static_cast<size_t>(nranks), &all));
  Layout l;
  bool isRoot = rank == c.root;
  switch (c.coll) {
    case CollType::AllReduce:
      l.sendBytes = one;
      l.recvBytes = one;
      break;
    case CollType::Broadcast:
      l.sendBytes = isRoot ? one : 0;
      l.recvBytes = one;
      break;
    case CollType::Reduce:
      l.sendBytes = one;
      l.recvBytes = isRoot ? one : 0;
      break;
    case CollType::AllGather:
      l.sendBytes = one;
      l.recvBytes = all;
      l.inPlaceOffset = one * rank;
      break;
    case CollType::ReduceScatter:
      l.sendBytes = all;
      l.recvBytes = one;
      l.inPlaceOffset = one * rank;
      break;
    case CollType::AlltoAll:
      l.sendBytes = all;
      l.recvBytes = all;
      l.inPlaceOffset = 0;  // in place: send == recv
      break;
    case CollType::Gather:
      l.sendBytes = one;
      l.recvBytes = isRoot ? all : 0;
      l.inPlaceOffset = one * rank;
      break;
    case CollType::Scatter:
      l.sendBytes = isRoot ? all : 0;
      l.recvBytes = one;
      l.inPlaceOffset = one * rank;
      break;
  }
  *out = l;
  return Status::ok();
}

// Both buffers host, or both device memory of this communicator's GPU.
Status checkMemory(const char* fn, lanesComm* comm, const void* send, size_t sendBytes,
                   const void* recv, size_t recvBytes, bool* onDevice) {
  BufferInfo s, r;
  LANES_RETURN_IF_ERROR(classifyBuffer(sendBytes > 0 ? send : nullptr, &s));
  LANES_RETURN_IF_ERROR(classifyBuffer(recvBytes > 0 ? recv : nullptr, &r));
  bool anyDevice = s.space == MemSpace::Device || r.space == MemSpace::Device;
  if (anyDevice && sendBytes > 0 && recvBytes > 0 && s.space != r.space)
    return invalidArgument(
        std::string(fn) + ": sendbuff is " + (s.space == MemSpace::Device ? "device" : "host") +
        " memory but recvbuff is " + (r.space == MemSpace::Device ? "device" : "host") +
        " memory; pass both on the GPU or both in host memory");
  for (const BufferInfo* b : {&s, &r}) {
    if (b->space != MemSpace::Device) continue;
    if (comm->cudaDev < 0)
      return invalidArgument(std::string(fn) +
                             ": a buffer is in GPU memory but this communicator was created "
                             "without a GPU (no CUDA device was current at init)");
    if (b->device != comm->cudaDev)
      return invalidArgument(std::string(fn) + ": a buffer is on GPU " + std::to_string(b->device) +
                             " but this communicator uses GPU " + std::to_string(comm->cudaDev) +
                             "; pass memory of the communicator's device");
  }
  *onDevice = anyDevice;
  return Status::ok();
}

lanesResult_t collective(const CollCall& c, lanesComm_t comm, cudaStream_t stream) {
  CommRef ref(comm);
  if (!ref) return report(nullptr, notLive(c.fn));
  if (Status st = awaitInit(comm); !st) return report(comm, st);
  Status status = [&]() -> Status {
    LANES_RETURN_IF_ERROR(checkDatatype(c.type));
    RedOp op;
    LANES_RETURN_IF_ERROR(resolveRedOp(comm, c.op, &op));
    if (isRooted(c.coll)) LANES_RETURN_IF_ERROR(checkRank("root", c.root, comm->nranks));
    Layout l;
    LANES_RETURN_IF_ERROR(layoutOf(c, comm->rank, comm->nranks, &l));
    LANES_RETURN_IF_ERROR(checkBuffer(c.fn, "sendbuff", c.send, l.sendBytes));
    LANES_RETURN_IF_ERROR(checkBuffer(c.fn, "recvbuff", c.recv, l.recvBytes));
    LANES_RETURN_IF_ERROR(checkAliasing(c.fn, c.send, l.sendBytes, c.recv, l.recvBytes,
                                        l.inPlaceOffset, l.inPlaceAllowed));
    bool onDevice = false;
    LANES_RETURN_IF_ERROR(
        checkMemory(c.fn, comm, c.send, l.sendBytes, c.recv, l.recvBytes, &onDevice));
    Request r;
    r.comm = comm;
    r.sendBytes = l.sendBytes;
    r.recvBytes = l.recvBytes;
    r.onDevice = onDevice;
    r.stream = stream;
    r.args.coll = c.coll;
    r.args.send = c.send;
    r.args.recv = c.recv;
    r.args.count = c.count;
    r.args.type = c.type;
    r.args.redop = op.kind;
    r.args.root = isRooted(c.coll) ? c.root : 0;
    r.args.rank = comm->rank;
    r.args.nranks = comm->nranks;
    r.op = op;
    return submit(std::move(r));
  }();
  return report(comm, status);
}

lanesResult_t pointToPoint(const char* fn, bool isSend, const void* sendbuf, void* recvbuf,
                           size_t count, lanesDataType_t type, int peer, lanesComm_t comm,
                           cudaStream_t stream) {
  CommRef ref(comm);
  if (!ref) return report(nullptr, notLive(fn));
  if (Status st = awaitInit(comm); !st) return report(comm, st);
  Status status = [&]() -> Status {
    LANES_RETURN_IF_ERROR(checkDatatype(type));
    LANES_RETURN_IF_ERROR(checkRank("peer", peer, comm->nranks));
    size_t bytes = 0;
    LANES_RETURN_IF_ERROR(checkByteCount(fn, count, datatypeSize(type), 1, &bytes));
    LANES_RETURN_IF_ERROR(
        checkBuffer(fn, isSend ? "sendbuff" : "recvbuff", isSend ? sendbuf : recvbuf, bytes));
    if (peer == comm->rank && !inGroup())
      return invalidUsage(std::string(fn) +
                          " to this rank itself outside a group would wait forever; put the "
                          "matching lanesSend and lanesRecv inside lanesGroupStart/End");
    bool onDevice = false;
    LANES_RETURN_IF_ERROR(
        checkMemory(fn, comm, sendbuf, isSend ? bytes : 0, recvbuf, isSend ? 0 : bytes, &onDevice));
    Request r;
    r.comm = comm;
    r.isP2p = true;
    r.sendBytes = isSend ? bytes : 0;
    r.recvBytes = isSend ? 0 : bytes;
    r.onDevice = onDevice;
    r.stream = stream;
    r.isSend = isSend;
    r.peer = peer;
    r.sendbuf = sendbuf;
    r.recvbuf = recvbuf;
    r.bytes = bytes;
    r.args.count = count;  // for LANES_CHECK_MISMATCH and progress reports
    r.args.type = type;
    return submit(std::move(r));
  }();
  return report(comm, status);
}

}  // namespace

extern "C" {

lanesResult_t lanesAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                             lanesDataType_t datatype, lanesRedOp_t op, lanesComm_t comm,
                             cudaStream_t stream) {
  return collective(
      {"lanesAllReduce", CollType::AllReduce, sendbuff, recvbuff, count, datatype, op, 0}, comm,
      stream);
}

lanesResult_t lanesBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                             lanesDataType_t datatype, int root, lanesComm_t comm,
                             cudaStream_t stream) {
  return collective(
      {"lanesBroadcast", CollType::Broadcast, sendbuff, recvbuff, count, datatype, lanesSum, root},
      comm, stream);
}

lanesResult_t lanesReduce(const void* sendbuff, void* recvbuff, size_t count,
                          lanesDataType_t datatype, lanesRedOp_t op, int root, lanesComm_t comm,
                          cudaStream_t stream) {
  return collective(
      {"lanesReduce", CollType::Reduce, sendbuff, recvbuff, count, datatype, op, root}, comm,
      stream);
}

lanesResult_t lanesAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                             lanesDataType_t datatype, lanesComm_t comm, cudaStream_t stream) {
  return collective(
      {"lanesAllGather", CollType::AllGather, sendbuff, recvbuff, sendcount, datatype, lanesSum, 0},
      comm, stream);
}

lanesResult_t lanesReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                 lanesDataType_t datatype, lanesRedOp_t op, lanesComm_t comm,
                                 cudaStream_t stream) {
  return collective({"lanesReduceScatter", CollType::ReduceScatter, sendbuff, recvbuff, recvcount,
                     datatype, op, 0},
                    comm, stream);
}

lanesResult_t lanesAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                            lanesDataType_t datatype, lanesComm_t comm, cudaStream_t stream) {
  return collective(
      {"lanesAlltoAll", CollType::AlltoAll, sendbuff, recvbuff, count, datatype, lanesSum, 0}, comm,
      stream);
}

lanesResult_t lanesGather(const void* sendbuff, void* recvbuff, size_t count,
                          lanesDataType_t datatype, int root, lanesComm_t comm,
                          cudaStream_t stream) {
  return collective(
      {"lanesGather", CollType::Gather, sendbuff, recvbuff, count, datatype, lanesSum, root}, comm,
      stream);
}

lanesResult_t lanesScatter(const void* sendbuff, void* recvbuff, size_t count,
                           lanesDataType_t datatype, int root, lanesComm_t comm,
                           cudaStream_t stream) {
  return collective(
      {"lanesScatter", CollType::Scatter, sendbuff, recvbuff, count, datatype, lanesSum, root},
      comm, stream);
}

lanesResult_t lanesSend(const void* sendbuff, size_t count, lanesDataType_t datatype, int peer,
                        lanesComm_t comm, cudaStream_t stream) {
  return pointToPoint("lanesSend", true, sendbuff, nullptr, count, datatype, peer, comm, stream);
}

lanesResult_t lanesRecv(void* recvbuff, size_t count, lanesDataType_t datatype, int peer,
                        lanesComm_t comm, cudaStream_t stream) {
  return pointToPoint("lanesRecv", false, nullptr, recvbuff, count, datatype, peer, comm, stream);
}

}  // extern "C"
