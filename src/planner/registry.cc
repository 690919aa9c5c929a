#include "planner/registry.h"

#include <algorithm>
#include <cstdio>

#include "kernels/cuda/ll_allreduce.h"
#include "kernels/cuda/simple_collective.h"
#include "planner/device_costs.h"
#include "planner/host_costs.h"

namespace lanes {
namespace {

bool isGatherScatter(CollType c) {
  return c == CollType::AllGather || c == CollType::Broadcast || c == CollType::ReduceScatter;
}

// One collective that moves bytes: what the single-call device paths take.
bool oneCollective(const CallFacts& f) { return !f.p2p && f.calls == 1 && f.bytes > 0; }

// The collectives the LL arena's kernels (LL and simple) serve.
bool llFamilyCollective(CollType c) {
  switch (c) {
    case CollType::AllReduce:
    case CollType::AllGather:
    case CollType::ReduceScatter:
    case CollType::Broadcast:
    case CollType::Reduce:
      return true;
    default:
      return false;  // all-to-all, gather, scatter
  }
}

// One collective the LL kernel serves, ranks of one host, its lines within
// the slot: a reduce-scatter posts each block in whole lines.
bool llServes(const CallFacts& f) {
  if (!f.device || !oneCollective(f) || !f.oneHost || !f.ll.ready) return false;
  if (!llFamilyCollective(f.coll)) return false;
  const int n = std::max(1, f.nranks);
  const bool scatter = f.coll == CollType::ReduceScatter;
  const size_t lines = cuda::llPostedLines(
      scatter ? cuda::LlCollective::ReduceScatter : cuda::LlCollective::AllReduce,
      scatter ? f.bytes / static_cast<size_t>(n) : f.bytes, n);
  return lines * cuda::kLlLinePayload <= f.ll.maxBytes;
}

// One collective the simple kernel serves: processes of one host (as LL), the
// bytes a rank posts within its slots (a reduce-scatter's blocks 16-byte aligned).
bool simpleServes(const CallFacts& f) {
  if (f.threadRanks || !f.device || !oneCollective(f) || !f.oneHost || !f.simple.ready)
    return false;
  if (!llFamilyCollective(f.coll)) return false;
  const int n = std::max(1, f.nranks);
  const bool scatter = f.coll == CollType::ReduceScatter;
  const size_t posted = cuda::simplePostedBytes(
      scatter ? cuda::LlCollective::ReduceScatter : cuda::LlCollective::AllReduce,
      scatter ? f.bytes / static_cast<size_t>(n) : f.bytes, n);
  return posted <= f.simple.maxBytes;
}

// One send or receive to another rank of this host, larger than what the
// proxy keeps where processes share a GPU: what the pair slots carry.
bool onePair(const CallFacts& f) {
  return f.device && f.p2p && f.calls == 0 && f.p2pCalls == 1 && !f.p2pSelf && f.oneHost &&
         !f.threadsBesideProcesses && f.pairs.ready &&
         (f.staged.proxyUpToBytes == 0 || f.bytes > f.staged.proxyUpToBytes);
}

// One non-empty send or receive to another process's rank of this host that
// fits the LL pair slots (both ends agreed their size at init).
bool llPairServes(const CallFacts& f) {
  return f.device && f.p2p && f.calls == 0 && f.p2pCalls == 1 && !f.p2pSelf && f.oneHost &&
         !f.threadRanks && f.llPairs.ready && f.bytes > 0 && f.bytes <= f.llPairs.maxBytes;
}

// What the proxy runs on the host for `f`: the host algorithm chosen for each
// collective of the batch (priced at the batch's mean size), or one hop for
// sends and receives (a socket hop where the ranks span hosts).
CostTerms hostPartOf(const CallFacts& f, const SelectionConfig& config) {
  const MachineFacts& m = config.machine;
  if (f.p2p) {
    const bool socket = !f.oneHost || m.hosts > 1;
    const double bytes = static_cast<double>(f.bytes);
    CostTerms c;
    c.latency = (socket ? m.socketLatencyUs : m.hopLatencyUs) * 1e-6;
    c.transfer = bytes / ((socket ? m.socketGBs : rateAt(m.hopGBs, bytes)) * 1e9);
    return c;
  }
  CallFacts one = f;
  one.device = false;
  one.calls = 1;
  one.bytes = f.bytes / static_cast<size_t>(std::max(1, f.calls));
  // The one chooseHostAlgorithm takes: the first allowed, else the cheapest;
  // never the shared arena (the proxy's copies take the transports).
  SelectionConfig transports = config;
  transports.sharedSumUsable = false;
  const std::vector<HostCandidate> ranked = rankHostAlgorithms(one, transports);
  if (ranked.empty()) return {};
  auto chosen =
      std::find_if(ranked.begin(), ranked.end(), [](const HostCandidate& c) { return c.allowed; });
  CostTerms all = (chosen != ranked.end() ? *chosen : ranked.front()).cost;
  const double calls = std::max(1, f.calls);
  all.latency *= calls;
  all.transfer *= calls;
  all.reduce *= calls;
  all.memory *= calls;
  return all;
}

// All-reduces (a batch of them) or one all-gather, broadcast or
// reduce-scatter, every rank on this host, above the shared-GPU proxy size.
bool stagedServes(const CallFacts& f) {
  if (!f.device || f.p2p || !f.oneHost || f.threadsBesideProcesses || !f.staged.ready) return false;
  const bool batchOfAllReduces = f.sameColl && f.coll == CollType::AllReduce;
  const bool gatherScatter = f.calls == 1 && isGatherScatter(f.coll) && f.staged.gatherScatter;
  if (!batchOfAllReduces && !gatherScatter) return false;
  return f.staged.proxyUpToBytes == 0 || f.bytes > f.staged.proxyUpToBytes;
}

// All-reduces (a batch of them) or one reduce-scatter where the staged path
// holds its slots in host memory: there the CPU can sum them.
bool hostSumServes(const CallFacts& f) {
  if (!stagedServes(f) || f.staged.inGpuMemory) return false;
  return (f.sameColl && f.coll == CollType::AllReduce) ||
         (f.calls == 1 && f.coll == CollType::ReduceScatter);
}

template <DevicePath P>
CostTerms costOf(const CallFacts& f, const SelectionConfig& config) {
  return devicePathCost(P, f, config.machine,
                        P == DevicePath::Proxy ? hostPartOf(f, config) : CostTerms{});
}

// Eligibility states what each path can serve and the limits measured for it
// (docs/gpu_data_path.md); among the eligible, the cost model decides.
const std::vector<DevicePathEntry> kDevicePathTable = {
    {DevicePath::SharedContext, "shared_context",
     "one all-reduce up to LANES_SHARED_CONTEXT_MAX_BYTES when every rank is a thread on this GPU",
     [](const CallFacts& f) {
       return f.device && oneCollective(f) && f.coll == CollType::AllReduce &&
              f.sharedContext.ready && f.bytes <= f.sharedContext.maxBytes;
     },
     costOf<DevicePath::SharedContext>, setupSharedContextPath},
    {DevicePath::Ll, "ll",
     "one all-reduce, all-gather, reduce-scatter, broadcast or reduce of up to "
     "LANES_LL_MAX_BYTES input per rank, ranks of one host, no thread ranks",
     [](const CallFacts& f) { return !f.threadRanks && llServes(f); }, costOf<DevicePath::Ll>,
     setupLlPath},
    {DevicePath::LlThreads, "ll_threads",
     "as ll, where ranks are threads of one process (off unless LANES_PROTO names it)",
     [](const CallFacts& f) { return f.threadRanks && llServes(f); }, costOf<DevicePath::LlThreads>,
     nullptr},
    {DevicePath::Simple, "simple",
     "one all-reduce, all-gather, reduce-scatter, broadcast or reduce of up to "
     "LANES_SIMPLE_MAX_BYTES input per rank (4 MiB up to 8 ranks), ranks of one host, no thread "
     "ranks: a flag per chunk through mapped host memory",
     simpleServes, costOf<DevicePath::Simple>, nullptr},
    {DevicePath::Staged, "staged",
     "all-reduces (any batch), one all-gather, broadcast or reduce-scatter, ranks of one host",
     stagedServes, costOf<DevicePath::Staged>, setupStagedPath},
    {DevicePath::HostSum, "host_sum",
     "all-reduces (any batch) and one reduce-scatter, ranks of one host, the staged path's "
     "slots in host memory: summed by CPU threads, no GPU kernel",
     hostSumServes, costOf<DevicePath::HostSum>, nullptr},
    {DevicePath::LlPairs, "ll_pairs",
     "one send or receive of up to the LL pair slots' size (64 KiB at up to 11 ranks) between "
     "processes of one host, in LL lines through mapped host memory",
     llPairServes, costOf<DevicePath::LlPairs>, nullptr},
    {DevicePath::Pairs, "pairs",
     "one send or receive between ranks of one host, through the staged path's pair slots in "
     "shared host memory",
     [](const CallFacts& f) { return onePair(f) && !f.pairs.inGpuMemory; },
     costOf<DevicePath::Pairs>, nullptr},
    {DevicePath::P2pPairs, "p2p_pairs",
     "as pairs, the slots in the receiver's GPU memory over P2P where the staged path's are "
     "(off unless LANES_PROTO names it)",
     [](const CallFacts& f) { return onePair(f) && f.pairs.inGpuMemory; },
     costOf<DevicePath::P2pPairs>, nullptr},
    {DevicePath::Proxy, "proxy",
     "everything: the host algorithm on pinned copies (for thread ranks, what staged does not "
     "serve)",
     // Thread ranks' streams wait on a flag that the proxy thread raises
     // after copies it enqueues later: a hazard (docs/gpu_data_path.md) they
     // take only where the staged path does not serve the call (or LANES_PROTO
     // leaves it out: the proxy is every call's last resort).
     [](const CallFacts& f) { return !(f.threadRanks && stagedServes(f)); },
     costOf<DevicePath::Proxy>, setupProxyPath},
};

// Host algorithms serve what algoSupports says; their measured-input costs
// (host_costs.h) decide among them, and ties keep this order. Direct comes
// before the chain: at two ranks both are one message and price alike (so do
// their bytes at three, where only latency tells them apart), and at two
// ranks direct took 0.67-0.91 of the chain's time where they differed most
// (broadcasts of 8-128 KiB on the H100 machine's 16 cores, reduces of 32-128
// KiB and 32 MiB on the 2-core VM, broadcasts from 8 MiB on the H200); the
// chain was ahead by 3-5% at a few other sizes on the VM.
constexpr AlgoId kHostAlgos[] = {
    AlgoId::Ring,         AlgoId::RecursiveDoubling, AlgoId::Direct,
    AlgoId::Chain,        AlgoId::Pairwise,          AlgoId::Tree,
    AlgoId::Hierarchical, AlgoId::SharedSum,         AlgoId::HalvingDoubling};

std::string microseconds(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), seconds < 1e-3 ? "%.1f us" : "%.3g ms",
                seconds < 1e-3 ? seconds * 1e6 : seconds * 1e3);
  return buf;
}

const DevicePathEntry& entryOf(DevicePath p) {
  for (const DevicePathEntry& e : kDevicePathTable)
    if (e.path == p) return e;
  return kDevicePathTable.back();
}

// Every entry (or the eligible ones) with its predicted time for the size
// class of `facts`, cheapest first; ties keep the table's order, so the
// order is the same on every rank.
std::vector<DeviceCandidate> rankedEntries(const CallFacts& facts, const SelectionConfig& config,
                                           bool eligibleOnly) {
  CallFacts f = facts;
  f.bytes = sizeClassBytes(facts.bytes);
  std::vector<DeviceCandidate> out;
  for (const DevicePathEntry& e : kDevicePathTable)
    if (!eligibleOnly || e.eligible(facts))
      out.push_back({e.path, e.cost(f, config), pathAllowed(config, e.path)});
  std::stable_sort(out.begin(), out.end(), [](const DeviceCandidate& a, const DeviceCandidate& b) {
    return a.cost.total() < b.cost.total();
  });
  return out;
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

std::vector<DeviceCandidate> rankDevicePaths(const CallFacts& facts,
                                             const SelectionConfig& config) {
  return rankedEntries(facts, config, true);
}

std::vector<DevicePath> devicePathOrder(const CallFacts& facts, const SelectionConfig& config) {
  std::vector<DevicePath> order;
  for (const DeviceCandidate& c : rankedEntries(facts, config, false)) order.push_back(c.path);
  return order;
}

DevicePath chooseDevicePath(const std::vector<DevicePath>& order, const CallFacts& facts,
                            const SelectionConfig& config) {
  for (DevicePath p : order)
    if (pathAllowed(config, p) && entryOf(p).eligible(facts)) return p;
  return DevicePath::Proxy;
}

DeviceChoice chooseDevicePath(const CallFacts& facts, const SelectionConfig& config) {
  for (const DeviceCandidate& c : rankDevicePaths(facts, config))
    if (c.allowed)
      return {c.path, config.proto.set() ? "LANES_PROTO=" + config.proto.text() : "lowest cost"};
  return {DevicePath::Proxy, "no allowed path serves it: the proxy"};
}

std::string explainDeviceChoice(const CallFacts& facts, const SelectionConfig& config) {
  const std::vector<DeviceCandidate> ranked = rankDevicePaths(facts, config);
  const DeviceChoice choice = chooseDevicePath(facts, config);
  std::string out = devicePathName(choice.path), next;
  bool priced = false;
  int others = 0;
  for (const DeviceCandidate& c : ranked) {
    if (c.path == choice.path) {
      // LANES_PROTO is named only where it changed the outcome.
      const bool forced = config.proto.set() && ranked.front().path != choice.path;
      out += " " + microseconds(c.cost.total()) + " (" + c.cost.deciding() +
             (forced ? ", " + choice.why : "") + ")";
      priced = true;
    } else if (others < 2) {
      next += std::string(others++ == 0 ? "; next " : ", ") + devicePathName(c.path) + " " +
              microseconds(c.cost.total()) + (c.allowed ? "" : " (left out by LANES_PROTO)");
    }
  }
  if (!priced) out += " (" + choice.why + ")";
  return out + next +
         (config.machine.gpu.measured ? "; measured GPU inputs"
                                      : "; assumed GPU inputs (lanes-topo --probe measures them)");
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
    if (!hostAlgoServes(algo, f, config.machine)) continue;
    // The proxy's calls never take the shared arena (core/execute.cc), nor
    // does a communicator whose arena could not be made.
    if (algo == AlgoId::SharedSum && (f.device || !config.sharedSumUsable)) continue;
    // Halving-doubling is a default only for all-reduces of more than two
    // ranks between hosts, where each hop it saves is a socket's, and not
    // where LANES_WIRE asks the ring to compress (it sends its partial sums
    // uncompressed). Through shared memory the ring streams the same bytes
    // with no step's wait, which the model, pricing both as whole steps, does
    // not see (docs/planner.md). Two ranks' halving-doubling is the ring's
    // two steps unpipelined.
    const bool onByDefault = algo != AlgoId::HalvingDoubling ||
                             (f.coll == CollType::AllReduce && config.machine.hosts > 1 &&
                              f.nranks > 2 && config.wire == WireFormat::Native);
    const bool allowed = config.algo.allows(algoName(algo), onByDefault);
    if (!onByDefault && !allowed) continue;
    out.push_back({algo, hostAlgoCost(algo, f, config.machine), allowed});
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
