// The CollSpecs: coll_data.h's arithmetic plus the call each makes through a
// CollBackend (Lanes or NCCL alike).
#include <string_view>

#include "lanes/lanes.h"
#include "perf/backend.h"
#include "perf/coll.h"
#include "perf/coll_data.h"
#include "perf/element.h"
#include "perf/memory.h"

namespace lanes::perf {
namespace {

Status runAllReduce(CollBackend& b, RankMemory&, const CallArgs& a) {
  return b.allReduce(a.send, a.recv, a.count, a.type, a.op, a.stream);
}
Status runAllGather(CollBackend& b, RankMemory&, const CallArgs& a) {
  return b.allGather(a.send, a.recv, a.count, a.type, a.stream);
}
Status runReduceScatter(CollBackend& b, RankMemory&, const CallArgs& a) {
  return b.reduceScatter(a.send, a.recv, a.count, a.type, a.op, a.stream);
}
Status runBroadcast(CollBackend& b, RankMemory&, const CallArgs& a) {
  return b.broadcast(a.send, a.recv, a.count, a.type, a.root, a.stream);
}
Status runReduce(CollBackend& b, RankMemory&, const CallArgs& a) {
  return b.reduce(a.send, a.recv, a.count, a.type, a.op, a.root, a.stream);
}
Status runAllToAll(CollBackend& b, RankMemory&, const CallArgs& a) {
  return b.allToAll(a.send, a.recv, a.count, a.type, a.stream);
}
Status runGather(CollBackend& b, RankMemory&, const CallArgs& a) {
  return b.gather(a.send, a.recv, a.count, a.type, a.root, a.stream);
}
Status runScatter(CollBackend& b, RankMemory&, const CallArgs& a) {
  return b.scatter(a.send, a.recv, a.count, a.type, a.root, a.stream);
}
Status runSendRecv(CollBackend& b, RankMemory&, const CallArgs& a) {
  const int rank = b.rank(), n = b.nranks();
  LANES_RETURN_IF_ERROR(b.groupStart());
  Status s = b.send(a.send, a.count, a.type, data::sendPeer(rank, n), a.stream);
  if (s) s = b.recv(a.recv, a.count, a.type, data::recvPeer(rank, n), a.stream);
  Status end = b.groupEnd();
  return s ? std::move(end) : std::move(s);
}
// nccl-tests' hypercube: the own block into place, then for each bit k the
// 2^k blocks gathered so far go to rank ^ 2^k and its 2^k come back.
Status runHyperCube(CollBackend& b, RankMemory& mem, const CallArgs& a) {
  const int rank = b.rank(), n = b.nranks();
  const size_t block = a.count * elementSize(a.type);
  auto* recv = static_cast<uint8_t*>(a.recv);
  if (recv + rank * block != a.send) {
    LANES_RETURN_IF_ERROR(mem.copy(recv + rank * block, a.send, block));
  }
  for (int mask = 1; mask < n; mask <<= 1) {
    const int mine = rank & ~(mask - 1);
    const int theirs = mine ^ mask;
    LANES_RETURN_IF_ERROR(b.groupStart());
    Status s = b.send(recv + mine * block, a.count * mask, a.type, rank ^ mask, a.stream);
    if (s) s = b.recv(recv + theirs * block, a.count * mask, a.type, rank ^ mask, a.stream);
    Status end = b.groupEnd();
    LANES_RETURN_IF_ERROR(s);
    LANES_RETURN_IF_ERROR(end);
  }
  return Status::ok();
}

}  // namespace

using namespace data;

#define PERF_SPEC(fn, ...)                \
  const CollSpec& fn() {                  \
    static const CollSpec s{__VA_ARGS__}; \
    return s;                             \
  }

PERF_SPEC(allReduceSpec, .name = "AllReduce", .key = "allreduce", .reduces = true, .rooted = false,
          .inPlace = true, .counts = sameCounts, .algBytes = paramBytes,
          .busFactor = allReduceBusFactor, .run = runAllReduce, .input = allReduceInput,
          .expect = allReduceExpect, .traffic = allReduceTraffic, .acceptsRanks = anyRanks)
PERF_SPEC(allGatherSpec, .name = "AllGather", .key = "allgather", .reduces = false, .rooted = false,
          .inPlace = true, .counts = gatherCounts, .algBytes = allRanksBytes,
          .busFactor = nMinusOneOverN, .run = runAllGather, .input = ownInput,
          .expect = allGatherExpect, .traffic = allGatherTraffic, .acceptsRanks = anyRanks)
PERF_SPEC(reduceScatterSpec, .name = "ReduceScatter", .key = "reducescatter", .reduces = true,
          .rooted = false, .inPlace = true, .counts = scatterCounts, .algBytes = allRanksBytes,
          .busFactor = nMinusOneOverN, .run = runReduceScatter, .input = allReduceInput,
          .expect = reduceScatterExpect, .traffic = reduceScatterTraffic, .acceptsRanks = anyRanks)
PERF_SPEC(broadcastSpec, .name = "Broadcast", .key = "broadcast", .reduces = false, .rooted = true,
          .inPlace = true, .counts = sameCounts, .algBytes = paramBytes, .busFactor = unitBusFactor,
          .run = runBroadcast, .input = ownInput, .expect = broadcastExpect,
          .traffic = broadcastTraffic, .acceptsRanks = anyRanks)
PERF_SPEC(reduceSpec, .name = "Reduce", .key = "reduce", .reduces = true, .rooted = true,
          .inPlace = true, .counts = sameCounts, .algBytes = paramBytes, .busFactor = unitBusFactor,
          .run = runReduce, .input = allReduceInput, .expect = reduceExpect,
          .traffic = reduceTraffic, .acceptsRanks = anyRanks)
PERF_SPEC(allToAllSpec, .name = "AlltoAll", .key = "alltoall", .reduces = false, .rooted = false,
          .inPlace = true, .counts = allToAllCounts, .algBytes = allRanksBytes,
          .busFactor = nMinusOneOverN, .run = runAllToAll, .input = ownInput,
          .expect = allToAllExpect, .traffic = allToAllTraffic, .acceptsRanks = anyRanks)
PERF_SPEC(gatherSpec, .name = "Gather", .key = "gather", .reduces = false, .rooted = true,
          .inPlace = true, .counts = gatherCounts, .algBytes = allRanksBytes,
          .busFactor = nMinusOneOverN, .run = runGather, .input = ownInput, .expect = gatherExpect,
          .traffic = gatherTraffic, .acceptsRanks = anyRanks)
PERF_SPEC(scatterSpec, .name = "Scatter", .key = "scatter", .reduces = false, .rooted = true,
          .inPlace = true, .counts = scatterCounts, .algBytes = allRanksBytes,
          .busFactor = nMinusOneOverN, .run = runScatter, .input = ownInput,
          .expect = scatterExpect, .traffic = scatterTraffic, .acceptsRanks = anyRanks)
PERF_SPEC(sendRecvSpec, .name = "SendRecv", .key = "sendrecv", .reduces = false, .rooted = false,
          .inPlace = true, .counts = sameCounts, .algBytes = paramBytes, .busFactor = unitBusFactor,
          .run = runSendRecv, .input = ownInput, .expect = sendRecvExpect,
          .traffic = sendRecvTraffic, .acceptsRanks = anyRanks, .inPlaceUndefinedOnNccl = true)
PERF_SPEC(hyperCubeSpec, .name = "HyperCube", .key = "hypercube", .reduces = false, .rooted = false,
          .inPlace = true, .counts = hyperCubeCounts, .algBytes = othersBytes,
          .busFactor = unitBusFactor, .run = runHyperCube, .input = ownInput,
          .expect = allGatherExpect, .traffic = allGatherTraffic, .acceptsRanks = powerOfTwoRanks)

#undef PERF_SPEC

bool checksInPlace(const CollSpec& spec, const char* backend) {
  return spec.inPlace && !(spec.inPlaceUndefinedOnNccl && std::string_view(backend) == "nccl");
}

}  // namespace lanes::perf
