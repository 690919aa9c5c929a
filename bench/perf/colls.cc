// The CollSpecs: coll_data.h's arithmetic plus the library call each makes.
#include "lanes/lanes.h"
#include "perf/coll.h"
#include "perf/coll_data.h"

namespace lanes::perf {
namespace {

lanesResult_t runAllReduce(const void* s, void* r, size_t c, lanesDataType_t t, lanesRedOp_t op,
                           int, lanesComm_t comm) {
  return lanesAllReduce(s, r, c, t, op, comm, nullptr);
}
lanesResult_t runAllGather(const void* s, void* r, size_t c, lanesDataType_t t, lanesRedOp_t, int,
                           lanesComm_t comm) {
  return lanesAllGather(s, r, c, t, comm, nullptr);
}
lanesResult_t runReduceScatter(const void* s, void* r, size_t c, lanesDataType_t t, lanesRedOp_t op,
                               int, lanesComm_t comm) {
  return lanesReduceScatter(s, r, c, t, op, comm, nullptr);
}
lanesResult_t runBroadcast(const void* s, void* r, size_t c, lanesDataType_t t, lanesRedOp_t,
                           int root, lanesComm_t comm) {
  return lanesBroadcast(s, r, c, t, root, comm, nullptr);
}
lanesResult_t runReduce(const void* s, void* r, size_t c, lanesDataType_t t, lanesRedOp_t op,
                        int root, lanesComm_t comm) {
  return lanesReduce(s, r, c, t, op, root, comm, nullptr);
}
lanesResult_t runAllToAll(const void* s, void* r, size_t c, lanesDataType_t t, lanesRedOp_t, int,
                          lanesComm_t comm) {
  return lanesAlltoAll(s, r, c, t, comm, nullptr);
}
lanesResult_t runGather(const void* s, void* r, size_t c, lanesDataType_t t, lanesRedOp_t, int root,
                        lanesComm_t comm) {
  return lanesGather(s, r, c, t, root, comm, nullptr);
}
lanesResult_t runScatter(const void* s, void* r, size_t c, lanesDataType_t t, lanesRedOp_t,
                         int root, lanesComm_t comm) {
  return lanesScatter(s, r, c, t, root, comm, nullptr);
}
lanesResult_t runSendRecv(const void* s, void* r, size_t c, lanesDataType_t t, lanesRedOp_t, int,
                          lanesComm_t comm) {
  int rank = 0, n = 1;
  lanesCommUserRank(comm, &rank);
  lanesCommCount(comm, &n);
  lanesResult_t res = lanesGroupStart();
  if (res != lanesSuccess) return res;
  lanesResult_t sres = lanesSend(s, c, t, data::sendPeer(rank, n), comm, nullptr);
  lanesResult_t rres = lanesRecv(r, c, t, data::recvPeer(rank, n), comm, nullptr);
  res = lanesGroupEnd();
  if (sres != lanesSuccess) return sres;
  if (rres != lanesSuccess) return rres;
  return res;
}

}  // namespace

using namespace data;

const CollSpec& allReduceSpec() {
  static const CollSpec s{"AllReduce",  true,           false,
                          sameCounts,   paramBytes,     allReduceBusFactor,
                          runAllReduce, allReduceInput, allReduceExpect};
  return s;
}
const CollSpec& allGatherSpec() {
  static const CollSpec s{"AllGather",    false,        false,    gatherCounts,   allRanksBytes,
                          nMinusOneOverN, runAllGather, ownInput, allGatherExpect};
  return s;
}
const CollSpec& reduceScatterSpec() {
  static const CollSpec s{"ReduceScatter",  true,           false,
                          scatterCounts,    allRanksBytes,  nMinusOneOverN,
                          runReduceScatter, allReduceInput, reduceScatterExpect};
  return s;
}
const CollSpec& broadcastSpec() {
  static const CollSpec s{"Broadcast",   false,        true,     sameCounts,     paramBytes,
                          unitBusFactor, runBroadcast, ownInput, broadcastExpect};
  return s;
}
const CollSpec& reduceSpec() {
  static const CollSpec s{"Reduce",      true,      true,           sameCounts,  paramBytes,
                          unitBusFactor, runReduce, allReduceInput, reduceExpect};
  return s;
}
const CollSpec& allToAllSpec() {
  static const CollSpec s{"AlltoAll",     false,       false,    allToAllCounts, allRanksBytes,
                          nMinusOneOverN, runAllToAll, ownInput, allToAllExpect};
  return s;
}
const CollSpec& gatherSpec() {
  static const CollSpec s{"Gather",       false,     true,     gatherCounts, allRanksBytes,
                          nMinusOneOverN, runGather, ownInput, gatherExpect};
  return s;
}
const CollSpec& scatterSpec() {
  static const CollSpec s{"Scatter",      false,      true,     scatterCounts, allRanksBytes,
                          nMinusOneOverN, runScatter, ownInput, scatterExpect};
  return s;
}
const CollSpec& sendRecvSpec() {
  static const CollSpec s{"SendRecv",    false,       false,    sameCounts,    paramBytes,
                          unitBusFactor, runSendRecv, ownInput, sendRecvExpect};
  return s;
}

}  // namespace lanes::perf
