#include "planner/registry.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "planner/host_costs.h"

namespace lanes {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

bool isGatherScatter(CollType c) {
  return c == CollType::AllGather || c == CollType::Broadcast || c == CollType::ReduceScatter;
}

// One collective that moves bytes: what the single-call device paths take.
bool oneCollective(const CallFacts& f) { return !f.p2p && f.calls == 1 && f.bytes > 0; }

// One send or receive to another rank of this host, larger than what the
// proxy keeps where processes share a GPU: what the pair slots carry.
bool onePair(const CallFacts& f) {
  return f.device && f.p2p && f.calls == 0 && f.p2pCalls == 1 && !f.p2pSelf && f.oneHost &&
         !f.threadsBesideProcesses && f.pairs.ready &&
         (f.staged.proxyUpToBytes == 0 || f.bytes > f.staged.proxyUpToBytes);
}

// The costs restate the order the device paths were measured in: a path
// that serves a call beats every path below it (docs/gpu_data_path.md).
const std::vector<DevicePathEntry> kDevicePathTable = {
    {DevicePath::SharedContext, "shared_context",
     "one all-reduce up to LANES_SHARED_CONTEXT_MAX_BYTES when every rank is a thread on this GPU",
     [](const CallFacts& f) {
       return f.device && oneCollective(f) && f.coll == CollType::AllReduce &&
              f.sharedContext.ready && f.bytes <= f.sharedContext.maxBytes;
     },
     [](const CallFacts&) { return 1.0; }, setupSharedContextPath},
    {DevicePath::Ll, "ll",
     "one all-reduce or all-gather up to LANES_LL_MAX_BYTES, ranks of one host, no thread ranks",
     [](const CallFacts& f) {
       return f.device && oneCollective(f) && !f.threadRanks && f.oneHost &&
              (f.coll == CollType::AllReduce || f.coll == CollType::AllGather) && f.ll.ready &&
              f.bytes <= f.ll.maxBytes;
     },
     [](const CallFacts&) { return 2.0; }, setupLlPath},
    {DevicePath::LlThreads, "ll_threads",
     "as ll, where ranks are threads of one process (off unless LANES_PROTO names it)",
     [](const CallFacts& f) {
       return f.device && oneCollective(f) && f.threadRanks && f.oneHost &&
              (f.coll == CollType::AllReduce || f.coll == CollType::AllGather) && f.ll.ready &&
              f.bytes <= f.ll.maxBytes;
     },
     [](const CallFacts&) { return 2.0; }, nullptr},
    {DevicePath::Staged, "staged",
     "all-reduces (any batch), one all-gather, broadcast or reduce-scatter, ranks of one host",
     [](const CallFacts& f) {
       if (!f.device || f.p2p || !f.oneHost || f.threadsBesideProcesses || !f.staged.ready)
         return false;
       const bool batchOfAllReduces = f.sameColl && f.coll == CollType::AllReduce;
       const bool gatherScatter = f.calls == 1 && isGatherScatter(f.coll) && f.staged.gatherScatter;
       if (!batchOfAllReduces && !gatherScatter) return false;
       return f.staged.proxyUpToBytes == 0 || f.bytes > f.staged.proxyUpToBytes;
     },
     [](const CallFacts&) { return 3.0; }, setupStagedPath},
    {DevicePath::Pairs, "pairs",
     "one send or receive between ranks of one host, through the staged path's pair slots in "
     "shared host memory",
     [](const CallFacts& f) { return onePair(f) && !f.pairs.inGpuMemory; },
     [](const CallFacts&) { return 3.0; }, nullptr},
    {DevicePath::P2pPairs, "p2p_pairs",
     "as pairs, the slots in the receiver's GPU memory over P2P where the staged path's are "
     "(off unless LANES_PROTO names it)",
     [](const CallFacts& f) { return onePair(f) && f.pairs.inGpuMemory; },
     [](const CallFacts&) { return 3.0; }, nullptr},
    {DevicePath::Proxy, "proxy", "everything: the host algorithm on pinned copies",
     [](const CallFacts&) { return true; }, [](const CallFacts&) { return 4.0; }, setupProxyPath},
};

// Host algorithms serve what algoSupports says; their measured-input costs
// (host_costs.h) decide among them.
constexpr AlgoId kHostAlgos[] = {AlgoId::Ring, AlgoId::RecursiveDoubling, AlgoId::Chain,
                                 AlgoId::Pairwise, AlgoId::Direct};

std::string microseconds(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), seconds < 1e-3 ? "%.1f us" : "%.3g ms",
                seconds < 1e-3 ? seconds * 1e6 : seconds * 1e3);
  return buf;
}

}  // namespace

Status setUpDevicePaths(lanesComm* comm) {
  for (const DevicePathEntry& e : kDevicePathTable)
    if (e.path == DevicePath::Proxy) LANES_RETURN_IF_ERROR(e.setup(comm));
  for (const DevicePathEntry& e : kDevicePathTable)
    if (e.setup != nullptr && e.path != DevicePath::Proxy) LANES_RETURN_IF_ERROR(e.setup(comm));
  settleDevicePaths(comm);
  return Status::ok();
}

DeviceChoice chooseDevicePath(const CallFacts& facts, const SelectionConfig& config) {
  const DevicePathEntry* best = nullptr;
  double bestCost = kNever;
  for (const DevicePathEntry& e : kDevicePathTable) {
    if (!pathAllowed(config, e.path) || !e.eligible(facts)) continue;
    const double cost = e.cost(facts);
    if (cost < bestCost) {
      best = &e;
      bestCost = cost;
    }
  }
  if (best == nullptr) return {DevicePath::Proxy, "no allowed path serves it: the proxy"};
  return {best->path, best->serves};
}

size_t sizeClassBytes(size_t bytes) {
  size_t c = 1;
  while (c < bytes && c < (size_t{1} << 62)) c <<= 1;
  return bytes == 0 ? 0 : c;
}

std::vector<HostCandidate> rankHostAlgorithms(const CallFacts& facts,
                                              const SelectionConfig& config) {
  CallFacts f = facts;
  f.bytes = sizeClassBytes(facts.bytes);
  std::vector<HostCandidate> out;
  for (AlgoId algo : kHostAlgos) {
    if (!algoSupports(algo, f.coll, f.nranks)) continue;
    out.push_back(
        {algo, hostAlgoCost(algo, f, config.machine), config.algo.allows(algoName(algo), true)});
  }
  // Ties keep the table's order, so the choice is the same on every rank.
  std::stable_sort(out.begin(), out.end(), [](const HostCandidate& a, const HostCandidate& b) {
    return a.cost.total() < b.cost.total();
  });
  return out;
}

AlgoChoice chooseHostAlgorithm(const CallFacts& facts, const SelectionConfig& config) {
  const std::vector<HostCandidate> ranked = rankHostAlgorithms(facts, config);
  for (const HostCandidate& c : ranked)
    if (c.allowed)
      return {c.algo, config.algo.set() ? "LANES_ALGO=" + config.algo.text() : "lowest cost"};
  if (!ranked.empty())
    return {ranked.front().algo, "lowest cost (LANES_ALGO=" + config.algo.text() +
                                     " names nothing that serves " + collTypeName(facts.coll) +
                                     ")"};
  return {AlgoId::Ring, "no algorithm serves it"};
}

std::string explainHostChoice(const CallFacts& facts, const SelectionConfig& config) {
  const std::vector<HostCandidate> ranked = rankHostAlgorithms(facts, config);
  const AlgoChoice choice = chooseHostAlgorithm(facts, config);
  std::string out;
  for (const HostCandidate& c : ranked) {
    if (c.algo != choice.algo) continue;
    out = std::string(algoName(c.algo)) + " " + microseconds(c.cost.total()) + " (" +
          c.cost.deciding() + (config.algo.set() ? ", " + choice.why : "") + ")";
  }
  int others = 0;
  for (const HostCandidate& c : ranked) {
    if (c.algo == choice.algo || others == 2) continue;
    out += std::string(others++ == 0 ? "; next " : ", ") + algoName(c.algo) + " " +
           microseconds(c.cost.total()) + (c.allowed ? "" : " (left out by LANES_ALGO)");
  }
  out += config.machine.measured ? "; measured inputs"
                                 : "; assumed inputs (lanes-topo --probe measures them)";
  return out;
}

AlgoChoice chooseHostAlgorithm(CollType coll, size_t bytes, int nranks,
                               const SelectionConfig& config) {
  CallFacts f;
  f.coll = coll;
  f.bytes = bytes;
  f.nranks = nranks;
  return chooseHostAlgorithm(f, config);
}

std::string planName(const CallFacts& facts, const SelectionConfig& config) {
  const std::string algo = algoName(chooseHostAlgorithm(facts, config).algo);
  if (!facts.device) return algo;
  const DevicePath path = chooseDevicePath(facts, config).path;
  if (path == DevicePath::Proxy) return "proxy/" + algo;
  return devicePathName(path);
}

}  // namespace lanes
