#include "tools/lanes_topo_plan.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

#include "exec/comm_config.h"
#include "exec/device_path.h"
#include "kernels/cuda/simple_collective.h"
#include "planner/machine_facts.h"
#include "planner/registry.h"

namespace lanes {
namespace {

constexpr size_t kTableSizes[] = {8, size_t{64} << 10, size_t{1} << 20, size_t{256} << 20};
constexpr CollType kColls[] = {CollType::AllReduce, CollType::AllGather, CollType::ReduceScatter,
                               CollType::Broadcast, CollType::Reduce,    CollType::AlltoAll,
                               CollType::Gather,    CollType::Scatter};

// 8 B to 512 MiB by factors of 4, then 1 GiB, as the calibration sweeps them.
std::vector<size_t> sweepSizes() {
  std::vector<size_t> out;
  for (size_t s = 8; s < (size_t{1} << 30); s *= 4) out.push_back(s);
  out.push_back(size_t{1} << 30);
  return out;
}

// Ranks on the busiest host.
int ranksPerHost(int nranks, PlanLaunch launch) {
  return (nranks + launch.hosts - 1) / std::max(1, launch.hosts);
}

// The selection as a communicator of this model's machine would read it,
// its ranks on `launch.hosts` such machines.
SelectionConfig configFor(const topo::Topology& t, int nranks, PlanLaunch launch) {
  SelectionConfig config = CommConfig::fromEnv().selection;
  config.machine = machineFactsOf(t);
  config.machine.hosts = launch.hosts;
  config.machine.ranksPerHost = nranks % launch.hosts == 0 ? nranks / launch.hosts : 0;
  // On one host rank r sits by GPU r % gpus: its package is that GPU's.
  if (launch.hosts == 1 && !t.gpus.empty()) {
    std::map<int, int> perPackage;
    for (int r = 0; r < nranks; ++r)
      ++perPackage[t.packageOf(t.gpus[static_cast<size_t>(r) % t.gpus.size()].node)];
    config.machine.packages = static_cast<int>(perPackage.size());
    const int first = perPackage.begin()->second;
    config.machine.ranksPerPackage = first;
    for (const auto& [package, ranks] : perPackage)
      if (ranks != first) config.machine.ranksPerPackage = 0;
  }
  return config;
}

// Whether processes sharing a GPU run under MPS: as given, else as CUDA says
// of this machine's first GPU (an imported model's has no CUDA index: no).
bool runsMps(const topo::Topology& t, PlanLaunch launch) {
  return launch.mps.value_or(!t.gpus.empty() && cudaDeviceRunsMps(t.gpus.front().cudaIndex));
}

// Whether every pair of the model's CUDA-visible GPUs passed the P2P probe.
bool p2pProbedEverywhere(const topo::Topology& t, int gpus) {
  for (int a = 0; a < gpus; ++a)
    for (int b = 0; b < gpus; ++b) {
      if (a == b) continue;
      bool ok = false;
      for (const topo::PairProbe& q : t.probes.pairs)
        ok = ok || (q.a == a && q.b == b && q.correct);
      if (!ok) return false;
    }
  return true;
}

// The paths as a communicator of processes (or of threads of one process)
// sets them up by default (the variables as exec/cuda reads them; LANES_PROTO
// is applied by the choice), rank r on GPU r % gpus. The staging slots go to
// GPU memory where the ranks share one context or MPS, or where every pair
// of GPUs passed the P2P probe; on this machine's GPU, MPS as CUDA says.
CallFacts defaultFacts(const topo::Topology& t, int nranks, int gpus, PlanLaunch launch,
                       const SelectionConfig& config) {
  const bool threads = launch.threads;
  const CommConfig env = CommConfig::fromEnv();
  const StageArenaConfig& stage = env.stage;
  CallFacts f;
  f.nranks = nranks;
  const int local = ranksPerHost(nranks, launch);
  f.oneHost = launch.hosts == 1;
  f.ranksPerGpu = (local + gpus - 1) / gpus;
  const bool shareGpu = local > gpus;
  f.threadRanks = threads && nranks > 1;
  const bool mps = runsMps(t, launch);
  // Threads on one GPU share its context: no time slices between them.
  const bool processesShare = shareGpu && !threads && !mps;
  f.timeSliced = processesShare;
  if (env.transport.p2p != P2pMode::Off)
    f.staged.inGpuMemory = gpus == 1 ? threads || (shareGpu && mps) : p2pProbedEverywhere(t, gpus);
  f.ll.ready = f.oneHost && nranks <= 8 && (!processesShare || config.llSharedGpu);
  f.ll.maxBytes = config.llMaxBytes;
  // The simple kernel's slots, for processes where LL is set up, as the
  // ranks size them.
  const size_t simpleBytes = cuda::simpleMaxBytesFor(nranks, config.simpleMaxBytes);
  f.simple = {f.ll.ready && !threads && simpleBytes > 0, simpleBytes};
  f.sharedContext = {threads && gpus == 1 && nranks > 1, config.sharedContextMaxBytes};
  f.staged.ready = f.oneHost;  // (across hosts: the proxy, over TCP)
  f.staged.gatherScatter = config.stagedGatherScatter;
  f.staged.proxyUpToBytes = processesShare ? config.sharedGpuProxyBytes : 0;
  f.staged.slotBytes = stage.chunkBytes;
  if (stage.pairChunkBytes > 0) f.staged.pairChunkBytes = stage.pairChunkBytes;
  f.pairs = {stage.pairChunkBytes > 0, false};
  f.staged.hostSumThreads = hostSumThreadsFor(env.hostSumThreads, local, config.machine.cores);
  f.wire = config.wire;  // the calls planned are float32 sums, as the perf tools run them
  return f;
}

std::string launchWords(PlanLaunch launch) {
  if (launch.hosts > 1) return "processes of " + std::to_string(launch.hosts) + " hosts like this";
  return launch.threads ? "threads of one process" : "processes of this host";
}

// A perf tool's size (nccl-tests': the larger buffer) as the input bytes per
// rank the choice reads (execute.cc: inputCount).
size_t inputBytes(CollType coll, size_t size, int nranks) {
  switch (coll) {
    case CollType::AllGather:
    case CollType::AlltoAll:
    case CollType::Gather:
    case CollType::Scatter:
      return size / static_cast<size_t>(nranks);
    default:
      return size;
  }
}

std::string sizeLabel(size_t bytes) {
  return bytes >= (1 << 30)   ? std::to_string(bytes >> 30) + " GiB"
         : bytes >= (1 << 20) ? std::to_string(bytes >> 20) + " MiB"
         : bytes >= 1024      ? std::to_string(bytes >> 10) + " KiB"
                              : std::to_string(bytes) + " B";
}

std::string table(const CallFacts& base, const SelectionConfig& config) {
  char line[256];
  std::snprintf(line, sizeof(line), "%-14s", "collective");
  std::string out = line;
  for (size_t bytes : kTableSizes) {
    std::snprintf(line, sizeof(line), " %-20s", sizeLabel(bytes).c_str());
    out += line;
  }
  out += "\n";
  for (CollType coll : kColls) {
    std::snprintf(line, sizeof(line), "%-14s", collTypeName(coll));
    out += line;
    for (size_t bytes : kTableSizes) {
      CallFacts f = base;
      f.coll = coll;
      f.bytes = bytes;
      std::snprintf(line, sizeof(line), " %-20s", planName(f, config).c_str());
      out += line;
    }
    out += "\n";
  }
  return out;
}

std::string inputsLine(const MachineFacts& m) {
  char buf[512];
  std::snprintf(
      buf, sizeof(buf),
      "# Cost model inputs (%s): call %.1f us, hop %.1f us, later step %.1f us, rooted call "
      "%.1f us, host summation call %.1f us; 1 MiB hop %.2f GB/s, reduce %.2f GB/s; memory %.1f "
      "GB/s; %d cores; TCP hop %.1f us, %.2f GB/s\n",
      m.measured ? "measured" : "assumed: lanes-topo --probe measures them", m.callUs,
      m.hopLatencyUs, m.stepUs, m.rootedCallUs(), m.sumCallUs(), m.hopGBs[4], m.reduceGBs[4],
      m.memGBs, m.cores, m.socketLatencyUs, m.socketGBs);
  std::string out = buf;
  std::snprintf(
      buf, sizeof(buf),
      "# GPU inputs (%s): 1 MiB copies H2D %.1f, D2H %.1f GB/s, %.0f%% each way when both "
      "run; stream flag %.1f us, kernel launch %.1f us\n",
      m.gpu.measured ? "measured"
                     : "assumed, scaled to the GPU's link: lanes-topo --probe measures them",
      m.gpu.h2dGBs[4], m.gpu.d2hGBs[4], 100 * m.gpu.bothWaysShare, m.gpu.flagUs, m.gpu.launchUs);
  return out + buf;
}

std::string jsonNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

// One row of the plan as JSON: a collective at one size, the choice and the
// candidates (already JSON); a comma first unless it is the list's first.
std::string rowJson(bool first, CollType c, size_t size, const char* chosen,
                    const std::string& candidates) {
  return std::string(first ? "" : ",") + "\n  {\"collective\": \"" + collTypeName(c) +
         "\", \"size\": " + std::to_string(size) + ", \"chosen\": \"" + chosen +
         "\", \"candidates\": [" + candidates + "]}";
}

}  // namespace

int planGpus(const topo::Topology& t) {
  int visible = 0;
  for (const topo::Gpu& g : t.gpus) visible += g.cudaIndex >= 0;
  return visible > 0 ? visible : static_cast<int>(t.gpus.size());
}

std::string formatPlanTable(const topo::Topology& t, int nranks, PlanLaunch launch,
                            std::optional<CollType> coll) {
  const int gpus = planGpus(t);
  const SelectionConfig config = configFor(t, nranks, launch);
  std::string out = "# Path choice for " + std::to_string(nranks) + " ranks as " +
                    launchWords(launch) + " (bytes per rank; src/planner/registry.h)";
  if (config.proto.set()) out += ", LANES_PROTO=" + config.proto.text();
  if (config.algo.set()) out += ", LANES_ALGO=" + config.algo.text();
  if (config.wire != WireFormat::Native)
    out += std::string(", LANES_WIRE=") + wireFormatName(config.wire);
  out += "\n" + inputsLine(config.machine);
  CallFacts facts = defaultFacts(t, nranks, gpus > 0 ? gpus : 1, launch, config);
  if (coll) {
    out += "\n# " + std::string(collTypeName(*coll)) +
           ", size by size: host buffers, then device buffers (the choice; the next two)\n";
    for (size_t size : sweepSizes()) {
      CallFacts f = facts;
      f.coll = *coll;
      f.bytes = inputBytes(*coll, size, nranks);
      out += sizeLabel(size) + "\n  host:   " + explainHostChoice(f, config) + "\n";
      f.device = true;
      if (gpus > 0) out += "  device: " + explainDeviceChoice(f, config) + "\n";
    }
    return out;
  }
  if (gpus > 0) {
    out +=
        "\n# Device buffers, rank r on GPU r % " + std::to_string(gpus) +
        (launch.hosts > 1 ? " of host r / " + std::to_string(ranksPerHost(nranks, launch)) : "") +
        "\n";
    facts.device = true;
    out += table(facts, config);
  } else {
    out += "\n# Device buffers: no GPU in this model\n";
  }
  out += "\n# Host buffers\n";
  facts.device = false;
  out += table(facts, config);
  return out;
}

// `allowed`: the default may choose it (LANES_PROTO / LANES_ALGO and the
// paths that are off unless named leave the others to forcing).
std::string candidateJson(const char* key, const char* name, const CostTerms& cost, bool allowed) {
  return std::string("{\"") + key + "\": \"" + name +
         "\", \"allowed\": " + (allowed ? "true" : "false") +
         ", \"predicted_us\": " + jsonNumber(cost.total() * 1e6) +
         ", \"latency_us\": " + jsonNumber(cost.latency * 1e6) +
         ", \"transfer_us\": " + jsonNumber(cost.transfer * 1e6) +
         ", \"reduce_us\": " + jsonNumber(cost.reduce * 1e6) +
         ", \"memory_us\": " + jsonNumber(cost.memory * 1e6) + "}";
}

std::string formatPlanJson(const topo::Topology& t, int nranks, PlanLaunch launch,
                           std::optional<CollType> coll) {
  const bool threads = launch.threads;
  const SelectionConfig config = configFor(t, nranks, launch);
  const MachineFacts& m = config.machine;
  const int gpus = planGpus(t);
  std::string out = "{\"format\": \"lanes-plan-1\", \"nranks\": " + std::to_string(nranks) +
                    ", \"inputs\": {\"measured\": " + (m.measured ? "true" : "false") +
                    ", \"call_us\": " + jsonNumber(m.callUs) +
                    ", \"hop_latency_us\": " + jsonNumber(m.hopLatencyUs) +
                    ", \"step_us\": " + jsonNumber(m.stepUs) +
                    ", \"rooted_us\": " + jsonNumber(m.rootedCallUs()) +
                    ", \"sum_us\": " + jsonNumber(m.sumCallUs()) +
                    ", \"hop_gbps_1mib\": " + jsonNumber(m.hopGBs[4]) +
                    ", \"reduce_gbps_1mib\": " + jsonNumber(m.reduceGBs[4]) +
                    ", \"mem_gbps\": " + jsonNumber(m.memGBs) +
                    ", \"cores\": " + std::to_string(m.cores) +
                    ", \"hosts\": " + std::to_string(m.hosts) +
                    ", \"gpu_measured\": " + (m.gpu.measured ? "true" : "false") +
                    ", \"gpu_h2d_gbps_1mib\": " + jsonNumber(m.gpu.h2dGBs[4]) +
                    ", \"gpu_d2h_gbps_1mib\": " + jsonNumber(m.gpu.d2hGBs[4]) +
                    ", \"gpu_flag_us\": " + jsonNumber(m.gpu.flagUs) +
                    ", \"gpu_launch_us\": " + jsonNumber(m.gpu.launchUs) + ", \"launch\": \"" +
                    (threads ? "threads" : "processes") +
                    "\", \"mps\": " + (runsMps(t, launch) ? "true" : "false") + "}, \"host\": [";
  bool first = true;
  for (CollType c : kColls) {
    if (coll && c != *coll) continue;
    for (size_t size : sweepSizes()) {
      CallFacts f;
      f.coll = c;
      f.nranks = nranks;
      f.bytes = inputBytes(c, size, nranks);
      std::string candidates;
      for (const HostCandidate& h : rankHostAlgorithms(f, config))
        candidates += (candidates.empty() ? "" : ", ") +
                      candidateJson("algo", algoName(h.algo), h.cost, h.allowed);
      out += rowJson(first, c, size, algoName(chooseHostAlgorithm(f, config).algo), candidates);
      first = false;
    }
  }
  out += "\n], \"device\": [";
  first = true;
  const CallFacts base = defaultFacts(t, nranks, gpus > 0 ? gpus : 1, launch, config);
  for (CollType c : kColls) {
    if (gpus == 0 || (coll && c != *coll)) continue;
    for (size_t size : sweepSizes()) {
      CallFacts f = base;
      f.device = true;
      f.coll = c;
      f.bytes = inputBytes(c, size, nranks);
      std::string candidates;
      for (const DeviceCandidate& d : rankDevicePaths(f, config))
        candidates += (candidates.empty() ? "" : ", ") +
                      candidateJson("path", devicePathName(d.path), d.cost, d.allowed);
      out += rowJson(first, c, size, devicePathName(chooseDevicePath(f, config).path), candidates);
      first = false;
    }
  }
  return out + "\n]}\n";
}

}  // namespace lanes
