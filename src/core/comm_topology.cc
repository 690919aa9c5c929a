// Per-process topology and the per-communicator placement exchange.
#include "core/comm_topology.h"

#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "core/comm.h"
#include "core/log.h"
#include "topology/discovery.h"

namespace lanes {

const topo::Topology& processTopology() {
  // The one process-wide object: every communicator of the process shares it.
  static std::once_flag once;
  static topo::Topology topology;
  std::call_once(once, [] { topology = topo::systemTopology(); });
  return topology;
}

namespace {
std::map<std::pair<uint64_t, int64_t>, int> ranksPerProcess(const lanesComm* comm) {
  std::map<std::pair<uint64_t, int64_t>, int> count;
  if (comm->bootstrap)
    for (const RankInfo& r : comm->bootstrap->ranks()) ++count[{r.hostHash, r.pid}];
  return count;
}
}  // namespace

bool someProcessHoldsSeveralRanks(const lanesComm* comm) {
  for (const auto& entry : ranksPerProcess(comm))
    if (entry.second > 1) return true;
  return false;
}

bool threadsBesideProcesses(const lanesComm* comm) {
  return ranksPerProcess(comm).size() > 1 && someProcessHoldsSeveralRanks(comm);
}

std::vector<int> ranksSharingMyContext(const lanesComm* comm) {
  std::vector<int> sharing;
  if (!comm->bootstrap) return sharing;
  const auto& ranks = comm->bootstrap->ranks();
  const RankInfo& self = ranks[static_cast<size_t>(comm->rank)];
  for (const RankInfo& r : ranks)
    if (r.hostHash == self.hostHash && r.pid == self.pid && r.cudaDev == self.cudaDev)
      sharing.push_back(r.rank);
  return sharing;
}

bool processesShareGpu(const lanesComm* comm) {
  if (!comm->bootstrap) return false;
  const auto& ranks = comm->bootstrap->ranks();
  const auto& where = comm->placement;
  if (where.size() != ranks.size()) return false;
  for (size_t i = 0; i < where.size(); ++i)
    for (size_t j = i + 1; j < where.size(); ++j)
      if (where[i].busId[0] != '\0' && where[i].hostHash == where[j].hostHash &&
          std::strncmp(where[i].busId, where[j].busId, sizeof(where[i].busId)) == 0 &&
          ranks[i].pid != ranks[j].pid)
        return true;
  return false;
}

Status exchangePlacement(lanesComm* comm) {
  const topo::Topology& t = processTopology();
  RankPlacement self;
  self.rank = comm->rank;
  self.cudaDev = comm->cudaDev;
  self.hostHash = comm->bootstrap->ranks()[comm->rank].hostHash;
  for (const topo::Gpu& g : t.gpus) {
    if (g.cudaIndex < 0 || g.cudaIndex != comm->cudaDev) continue;
    self.numa = g.numa;
    self.package = t.packageOf(g.node);
    self.linkGen = t.nodes[g.node].link.curGen;
    self.linkWidth = t.nodes[g.node].link.curWidth;
    std::strncpy(self.busId, g.busId.c_str(), sizeof(self.busId) - 1);
  }
  std::vector<RankPlacement> all(comm->nranks);
  all[comm->rank] = self;
  LANES_RETURN_IF_ERROR(comm->bootstrap->allGather(all.data(), sizeof(RankPlacement),
                                                   Deadline::after(comm->options.timeoutSeconds)));
  comm->placement = std::move(all);
  for (const RankPlacement& p : comm->placement)
    LANES_INFO(Topo, comm->rank, "rank %d: GPU %d bus %s NUMA %d package %d link Gen%d x%d", p.rank,
               p.cudaDev, p.busId[0] ? p.busId : "-", p.numa, p.package, p.linkGen, p.linkWidth);
  return Status::ok();
}

}  // namespace lanes
