// The CollSpecs: coll_data.h's arithmetic plus the library call each makes.
#include "lanes/lanes.h"
#include "perf/coll.h"
#include "perf/coll_data.h"

namespace lanes::perf {
namespace {

lanesResult_t runAllReduce(const void* s, void* r, size_t c, lanesDataType_t t, lanesRedOp_t op,
                           int, lanesComm_t comm, cudaStream_t stream) {
  return lanesAllReduce(s, r, c, t, op, comm, stream);
}
lanesResult_t runAllGather(const void* s, void* r, size_t c, lanesDataType_t t, lanesRedOp_t, int,
                           lanesComm_t comm, cudaStream_t stream) {
  return lanesAllGather(s, r, c, t, comm, stream);
}
lanesResult_t runReduceScatter(const void* s, void* r, size_t c, lanesDataType_t t, lanesRedOp_t op,
                               int, lanesComm_t comm, cudaStream_t stream) {
  return lanesReduceScatter(s, r, c, t, op, comm, stream);
}
lanesResult_t runBroadcast(const void* s, void* r, size_t c, lanesDataType_t t, lanesRedOp_t,
                           int root, lanesComm_t comm, cudaStream_t stream) {
  return lanesBroadcast(s, r, c, t, root, comm, stream);
}
lanesResult_t runReduce(const void* s, void* r, size_t c, lanesDataType_t t, lanesRedOp_t op,
                        int root, lanesComm_t comm, cudaStream_t stream) {
  return lanesReduce(s, r, c, t, op, root, comm, stream);
}
lanesResult_t runAllToAll(const void* s, void* r, size_t c, lanesDataType_t t, lanesRedOp_t, int,
                          lanesComm_t comm, cudaStream_t stream) {
  return lanesAlltoAll(s, r, c, t, comm, stream);
}
lanesResult_t runGather(const void* s, void* r, size_t c, lanesDataType_t t, lanesRedOp_t, int root,
                        lanesComm_t comm, cudaStream_t stream) {
  return lanesGather(s, r, c, t, root, comm, stream);
}
lanesResult_t runScatter(const void* s, void* r, size_t c, lanesDataType_t t, lanesRedOp_t,
                         int root, lanesComm_t comm, cudaStream_t stream) {
  return lanesScatter(s, r, c, t, root, comm, stream);
}
lanesResult_t runSendRecv(const void* s, void* r, size_t c, lanesDataType_t t, lanesRedOp_t, int,
                          lanesComm_t comm, cudaStream_t stream) {
  int rank = 0, n = 1;
  lanesCommUserRank(comm, &rank);
  lanesCommCount(comm, &n);
  lanesResult_t res = lanesGroupStart();
  if (res != lanesSuccess) return res;
  lanesResult_t sres = lanesSend(s, c, t, data::sendPeer(rank, n), comm, stream);
  lanesResult_t rres = lanesRecv(r, c, t, data::recvPeer(rank, n), comm, stream);
  res = lanesGroupEnd();
  if (sres != lanesSuccess) return sres;
  if (rres != lanesSuccess) return rres;
  return res;
}

}  // namespace

using namespace data;

const CollSpec& allReduceSpec() {
  static const CollSpec s{.name = "AllReduce",
                          .reduces = true,
                          .rooted = false,
                          .inPlace = true,
                          .counts = sameCounts,
                          .algBytes = paramBytes,
                          .busFactor = allReduceBusFactor,
                          .run = runAllReduce,
                          .input = allReduceInput,
                          .expect = allReduceExpect};
  return s;
}
const CollSpec& allGatherSpec() {
  static const CollSpec s{.name = "AllGather",
                          .reduces = false,
                          .rooted = false,
                          .inPlace = true,
                          .counts = gatherCounts,
                          .algBytes = allRanksBytes,
                          .busFactor = nMinusOneOverN,
                          .run = runAllGather,
                          .input = ownInput,
                          .expect = allGatherExpect};
  return s;
}
const CollSpec& reduceScatterSpec() {
  static const CollSpec s{.name = "ReduceScatter",
                          .reduces = true,
                          .rooted = false,
                          .inPlace = true,
                          .counts = scatterCounts,
                          .algBytes = allRanksBytes,
                          .busFactor = nMinusOneOverN,
                          .run = runReduceScatter,
                          .input = allReduceInput,
                          .expect = reduceScatterExpect};
  return s;
}
const CollSpec& broadcastSpec() {
  static const CollSpec s{.name = "Broadcast",
                          .reduces = false,
                          .rooted = true,
                          .inPlace = true,
                          .counts = sameCounts,
                          .algBytes = paramBytes,
                          .busFactor = unitBusFactor,
                          .run = runBroadcast,
                          .input = ownInput,
                          .expect = broadcastExpect};
  return s;
}
const CollSpec& reduceSpec() {
  static const CollSpec s{.name = "Reduce",
                          .reduces = true,
                          .rooted = true,
                          .inPlace = true,
                          .counts = sameCounts,
                          .algBytes = paramBytes,
                          .busFactor = unitBusFactor,
                          .run = runReduce,
                          .input = allReduceInput,
                          .expect = reduceExpect};
  return s;
}
const CollSpec& allToAllSpec() {
  static const CollSpec s{.name = "AlltoAll",
                          .reduces = false,
                          .rooted = false,
                          .inPlace = true,
                          .counts = allToAllCounts,
                          .algBytes = allRanksBytes,
                          .busFactor = nMinusOneOverN,
                          .run = runAllToAll,
                          .input = ownInput,
                          .expect = allToAllExpect};
  return s;
}
const CollSpec& gatherSpec() {
  static const CollSpec s{.name = "Gather",
                          .reduces = false,
                          .rooted = true,
                          .inPlace = true,
                          .counts = gatherCounts,
                          .algBytes = allRanksBytes,
                          .busFactor = nMinusOneOverN,
                          .run = runGather,
                          .input = ownInput,
                          .expect = gatherExpect};
  return s;
}
const CollSpec& scatterSpec() {
  static const CollSpec s{.name = "Scatter",
                          .reduces = false,
                          .rooted = true,
                          .inPlace = true,
                          .counts = scatterCounts,
                          .algBytes = allRanksBytes,
                          .busFactor = nMinusOneOverN,
                          .run = runScatter,
                          .input = ownInput,
                          .expect = scatterExpect};
  return s;
}
const CollSpec& sendRecvSpec() {
  static const CollSpec s{.name = "SendRecv",
                          .reduces = false,
                          .rooted = false,
                          .inPlace = true,
                          .counts = sameCounts,
                          .algBytes = paramBytes,
                          .busFactor = unitBusFactor,
                          .run = runSendRecv,
                          .input = ownInput,
                          .expect = sendRecvExpect};
  return s;
}

}  // namespace lanes::perf
