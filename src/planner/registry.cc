#include "planner/registry.h"

#include <limits>

namespace lanes {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

bool isGatherScatter(CollType c) {
  return c == CollType::AllGather || c == CollType::Broadcast || c == CollType::ReduceScatter;
}
bool isPowerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

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

// Below smallBytes latency dominates: log2(n) rounds beat 2(n-1) ring steps
// (with 2 ranks, one exchange replaces the ring's two dependent hops).
double recursiveDoublingCost(const CallFacts& f, const SelectionConfig& c) {
  if (f.bytes > c.smallBytes) return 3.0;
  if (f.coll == CollType::AllReduce) return f.nranks > 1 ? 1.0 : 3.0;
  return f.nranks > 2 && isPowerOfTwo(f.nranks) ? 1.0 : 3.0;
}

const std::vector<HostAlgoEntry> kHostAlgoTable = {
    {AlgoId::Ring, [](const CallFacts&, const SelectionConfig&) { return 2.0; }},
    {AlgoId::RecursiveDoubling, recursiveDoublingCost},
    {AlgoId::Chain, [](const CallFacts&, const SelectionConfig&) { return 1.0; }},
    {AlgoId::Pairwise, [](const CallFacts&, const SelectionConfig&) { return 1.0; }},
    // Gather and scatter; the chain serves broadcast and reduce better.
    {AlgoId::Direct,
     [](const CallFacts& f, const SelectionConfig&) {
       return f.coll == CollType::Gather || f.coll == CollType::Scatter ? 1.0 : 2.0;
     }},
};

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

AlgoChoice chooseHostAlgorithm(const CallFacts& facts, const SelectionConfig& config) {
  const HostAlgoEntry* best = nullptr;
  const HostAlgoEntry* bestAny = nullptr;
  double bestCost = kNever, bestAnyCost = kNever;
  for (const HostAlgoEntry& e : kHostAlgoTable) {
    if (!algoSupports(e.algo, facts.coll, facts.nranks)) continue;
    const double cost = e.cost(facts, config);
    if (cost < bestAnyCost) {
      bestAny = &e;
      bestAnyCost = cost;
    }
    if (config.algo.allows(algoName(e.algo), true) && cost < bestCost) {
      best = &e;
      bestCost = cost;
    }
  }
  if (best != nullptr)
    return {best->algo, config.algo.set() ? "LANES_ALGO=" + config.algo.text() : "lowest cost"};
  if (bestAny != nullptr)
    return {bestAny->algo, "lowest cost (LANES_ALGO=" + config.algo.text() +
                               " names nothing that serves " + collTypeName(facts.coll) + ")"};
  return {AlgoId::Ring, "no algorithm serves it"};
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
