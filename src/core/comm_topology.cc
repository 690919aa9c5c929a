// Per-process topology and the per-communicator placement exchange.
#include "core/comm_topology.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/ring_order.h"
#include "base/log.h"
#include "core/comm.h"
#include "core/first_use_probe.h"
#include "planner/machine_facts.h"
#include "planner/p2p_rule.h"
#include "topology/discovery.h"

namespace lanes {

namespace {

// The one process-wide object: every communicator of the process shares it.
topo::Topology& theProcessTopology() {
  static std::once_flag once;
  static topo::Topology topology;
  std::call_once(once, [] { topology = topo::systemTopology(); });
  return topology;
}

// Guards the topology's probes, the one part written after discovery.
std::mutex& probesMutex() {
  static std::mutex m;
  return m;
}

}  // namespace

const topo::Topology& processTopology() { return theProcessTopology(); }

topo::Topology processTopologySnapshot() {
  const topo::Topology& t = theProcessTopology();
  std::lock_guard<std::mutex> lock(probesMutex());
  return t;
}

void attachProcessProbes(topo::Probes probes) {
  topo::Topology& t = theProcessTopology();
  std::lock_guard<std::mutex> lock(probesMutex());
  t.probes = std::move(probes);
}

bool inCpuList(const std::string& list, int cpu) {
  size_t at = 0;
  while (at < list.size()) {
    size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    const std::string item = list.substr(at, comma - at);
    const size_t dash = item.find('-');
    char* end = nullptr;
    const long first = std::strtol(item.c_str(), &end, 10);
    const long last =
        dash == std::string::npos ? first : std::strtol(item.c_str() + dash + 1, &end, 10);
    if (end != item.c_str() && cpu >= first && cpu <= last) return true;
    at = comma + 1;
  }
  return false;
}

bool narrowCpus(const std::string& list, const cpu_set_t& allowed, cpu_set_t* out) {
  CPU_ZERO(out);
  bool narrower = false;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    if (inCpuList(list, cpu))
      CPU_SET(cpu, out);
    else
      narrower = true;
  }
  return narrower && CPU_COUNT(out) > 0;
}

bool gpuLocalCpus(const lanesComm* comm, cpu_set_t* out) {
  if (comm->rank < 0 || comm->rank >= static_cast<int>(comm->placement.size())) return false;
  const RankPlacement& me = comm->placement[static_cast<size_t>(comm->rank)];
  cpu_set_t allowed;
  if (me.busId[0] == '\0' || sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return false;
  for (const topo::Gpu& g : processTopology().gpus)
    if (g.busId == me.busId && !g.cpus.empty()) return narrowCpus(g.cpus, allowed, out);
  return false;
}

int hostNumaNode(const topo::Topology& t, const cpu_set_t* allowed, int current) {
  std::vector<int> numa;
  for (size_t i = 0; i < t.nodes.size(); ++i)
    if (t.nodes[i].kind == topo::NodeKind::Numa) numa.push_back(static_cast<int>(i));
  if (numa.size() == 1) return numa.front();
  if (allowed != nullptr && CPU_COUNT(allowed) > 0) {
    for (int n : numa) {
      bool holdsAll = true;
      for (int cpu = 0; cpu < CPU_SETSIZE && holdsAll; ++cpu)
        holdsAll = !CPU_ISSET(cpu, allowed) || inCpuList(t.nodes[n].name, cpu);
      if (holdsAll) return n;
    }
  }
  if (current >= 0)
    for (int n : numa)
      if (inCpuList(t.nodes[n].name, current)) return n;
  return -1;
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

int ranksPerGpu(const lanesComm* comm) {
  int most = 1;
  const auto& where = comm->placement;
  for (size_t i = 0; i < where.size(); ++i) {
    if (where[i].busId[0] == '\0') continue;
    int same = 0;
    for (const RankPlacement& p : where)
      same += p.hostHash == where[i].hostHash &&
              std::strncmp(p.busId, where[i].busId, sizeof(p.busId)) == 0;
    most = std::max(most, same);
  }
  return most;
}

bool allOnOneHost(const lanesComm* comm) {
  if (!comm->bootstrap) return true;
  const auto& ranks = comm->bootstrap->ranks();
  return std::all_of(ranks.begin(), ranks.end(),
                     [&](const RankInfo& r) { return r.hostHash == ranks.front().hostHash; });
}

bool processesTimeSliceGpu(const lanesComm* comm) {
  if (!comm->bootstrap) return false;
  const auto& ranks = comm->bootstrap->ranks();
  const auto& where = comm->placement;
  if (where.size() != ranks.size()) return false;
  for (size_t i = 0; i < where.size(); ++i)
    for (size_t j = i + 1; j < where.size(); ++j)
      if (where[i].busId[0] != '\0' && where[i].hostHash == where[j].hostHash &&
          std::strncmp(where[i].busId, where[j].busId, sizeof(where[i].busId)) == 0 &&
          ranks[i].pid != ranks[j].pid && !(where[i].mps && where[j].mps))
        return true;
  return false;
}

namespace {

// Every rank must frame the wire alike: where the ranks asked for different
// formats, all of them keep the native one and say why.
void agreeOnWire(lanesComm* comm) {
  WireFormat& wire = comm->config.selection.wire;
  for (const RankPlacement& p : comm->placement) {
    if (p.wire == static_cast<int32_t>(wire)) continue;
    LANES_WARN(Init, comm->rank,
               "LANES_WIRE differs between ranks (this rank %s, rank %d %s): every rank sends "
               "float32 sums uncompressed; set it alike on every rank",
               wireFormatName(wire), p.rank, wireFormatName(static_cast<WireFormat>(p.wire)));
    wire = WireFormat::Native;
    return;
  }
  if (wire != WireFormat::Native)
    LANES_INFO(Init, comm->rank,
               "float32 sums on the ring and in host summation cross the wire as %s "
               "(LANES_WIRE; lossy, docs/wire_formats.md)",
               wireFormatName(wire));
}

}  // namespace

Status exchangePlacement(lanesComm* comm) {
  if (comm->cudaDev >= 0) probeMachineAtFirstUse(comm->cudaDev, comm->options.timeoutSeconds);
  const topo::Topology t = processTopologySnapshot();
  RankPlacement self;
  self.rank = comm->rank;
  self.cudaDev = comm->cudaDev;
  self.hostHash = comm->bootstrap->ranks()[comm->rank].hostHash;
  if (comm->cudaDev < 0) {
    // Without a GPU the rank's memory is where its CPUs are.
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    const bool known = sched_getaffinity(0, sizeof(allowed), &allowed) == 0;
    const int node = hostNumaNode(t, known ? &allowed : nullptr, sched_getcpu());
    if (node >= 0) {
      self.numa = t.nodes[node].osIndex;
      self.package = t.packageOf(node);
    }
  }
  for (const topo::Gpu& g : t.gpus) {
    if (g.cudaIndex < 0 || g.cudaIndex != comm->cudaDev) continue;
    self.numa = g.numa;
    self.package = t.packageOf(g.node);
    self.linkGen = t.nodes[g.node].link.curGen;
    self.linkWidth = t.nodes[g.node].link.curWidth;
    std::strncpy(self.busId, g.busId.c_str(), sizeof(self.busId) - 1);
  }
  if (comm->cudaDev >= 0) self.mps = cudaDeviceRunsMps(comm->cudaDev) ? 1 : 0;
  self.wire = static_cast<int32_t>(comm->config.selection.wire);
  std::vector<RankPlacement> all(comm->nranks);
  all[comm->rank] = self;
  LANES_RETURN_IF_ERROR(comm->bootstrap->allGather(all.data(), sizeof(RankPlacement),
                                                   Deadline::after(comm->options.timeoutSeconds)));
  comm->placement = std::move(all);
  agreeOnWire(comm);

  // The cost model's figures: rank 0's on every rank, so every rank plans
  // alike even where hosts or caches differ.
  static_assert(std::is_trivially_copyable_v<MachineFacts>, "exchanged as bytes");
  std::vector<MachineFacts> machines(comm->nranks);
  machines[comm->rank] = machineFactsOf(t, comm->cudaDev);
  LANES_RETURN_IF_ERROR(comm->bootstrap->allGather(machines.data(), sizeof(MachineFacts),
                                                   Deadline::after(comm->options.timeoutSeconds)));
  MachineFacts& machine = comm->config.selection.machine;
  machine = machines[0];
  std::vector<uint64_t> hosts;
  comm->hostOf.clear();
  for (const RankPlacement& p : comm->placement) {
    auto it = std::find(hosts.begin(), hosts.end(), p.hostHash);
    if (it == hosts.end()) it = hosts.insert(hosts.end(), p.hostHash);
    comm->hostOf.push_back(static_cast<int>(it - hosts.begin()));
  }
  machine.hosts = static_cast<int>(hosts.size());
  std::vector<std::vector<int>> groups;
  machine.ranksPerHost =
      hostGroups(comm->hostOf, comm->nranks, &groups) ? static_cast<int>(groups.front().size()) : 0;
  // The CPU packages of each host (an unknown package is one more).
  std::vector<std::pair<uint64_t, int32_t>> packages;
  comm->packageOf.clear();
  for (const RankPlacement& p : comm->placement) {
    const std::pair<uint64_t, int32_t> key{p.hostHash, p.package};
    auto it = std::find(packages.begin(), packages.end(), key);
    if (it == packages.end()) it = packages.insert(packages.end(), key);
    comm->packageOf.push_back(static_cast<int>(it - packages.begin()));
  }
  if (machine.hosts == 1) {
    machine.packages = static_cast<int>(packages.size());
    machine.ranksPerPackage = hostGroups(comm->packageOf, comm->nranks, &groups)
                                  ? static_cast<int>(groups.front().size())
                                  : 0;
  }
  LANES_INFO(
      Plan, comm->rank,
      "cost model inputs (%s, rank 0's): call %.1f us, hop %.1f us, later step %.1f us, rooted "
      "call %.1f us, host summation call %.1f us; 1 MiB hop %.1f GB/s, reduce %.1f GB/s; memory "
      "%.1f GB/s; %d cores; %d "
      "host(s), TCP hop %.1f us, %.2f GB/s",
      machine.measured ? "measured" : "assumed: run lanes-topo --probe", machine.callUs,
      machine.hopLatencyUs, machine.stepUs, machine.rootedCallUs(), machine.sumCallUs(),
      machine.hopGBs[4], machine.reduceGBs[4], machine.memGBs, machine.cores, machine.hosts,
      machine.socketLatencyUs, machine.socketGBs);
  if (comm->cudaDev >= 0)
    LANES_INFO(
        Plan, comm->rank,
        "GPU cost model inputs (%s, rank 0's GPU): 1 MiB copies H2D %.1f, D2H %.1f GB/s; "
        "stream flag %.1f us, kernel launch %.1f us; %d rank(s) on the busiest GPU",
        machine.gpu.measured ? "measured" : "assumed, scaled to the link: run lanes-topo --probe",
        machine.gpu.h2dGBs[4], machine.gpu.d2hGBs[4], machine.gpu.flagUs, machine.gpu.launchUs,
        ranksPerGpu(comm));
  for (const RankPlacement& p : comm->placement)
    LANES_INFO(Topo, comm->rank, "rank %d: GPU %d bus %s NUMA %d package %d link Gen%d x%d", p.rank,
               p.cudaDev, p.busId[0] ? p.busId : "-", p.numa, p.package, p.linkGen, p.linkWidth);
  std::vector<std::string> busIds;  // of the ranks on this host
  for (const RankPlacement& p : comm->placement)
    if (p.hostHash == self.hostHash && p.busId[0] != '\0')
      busIds.emplace_back(p.busId, strnlen(p.busId, sizeof(p.busId)));
  comm->p2pRefusal = p2pRefusalByTopology(t, busIds);
  if (!comm->p2pRefusal.empty())
    LANES_INFO(Topo, comm->rank, "P2P off by topology: %s", comm->p2pRefusal.c_str());
  std::vector<RingPlace> places;
  for (const RankPlacement& p : comm->placement) places.push_back({p.hostHash, p.package, p.numa});
  comm->ringOrder = ringOrder(places);
  if (isIdentityOrder(comm->ringOrder))
    comm->ringOrder.clear();
  else
    LANES_INFO(Init, comm->rank, "%s", describeRingOrder(places, comm->ringOrder).c_str());
  return Status::ok();
}

}  // namespace lanes
