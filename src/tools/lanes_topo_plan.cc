#include "tools/lanes_topo_plan.h"

#include <cstdio>
#include <vector>

#include "exec/comm_config.h"
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

// The selection as a communicator of this model's machine would read it.
SelectionConfig configFor(const topo::Topology& t) {
  SelectionConfig config = CommConfig::fromEnv().selection;
  config.machine = machineFactsOf(t);
  return config;
}

// The paths as a communicator of processes sets them up by default (the
// variables as exec/cuda reads them; LANES_PROTO is applied by the choice).
CallFacts defaultFacts(int nranks, int gpus, const SelectionConfig& config) {
  CallFacts f;
  f.nranks = nranks;
  const bool shareGpu = nranks > gpus;
  f.ll.ready = nranks <= 8 && (!shareGpu || config.llSharedGpu);
  f.ll.maxBytes = config.llMaxBytes;
  f.staged.ready = true;
  f.staged.gatherScatter = config.stagedGatherScatter;
  f.staged.proxyUpToBytes = shareGpu ? config.sharedGpuProxyBytes : 0;
  return f;
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
  char buf[256];
  std::snprintf(
      buf, sizeof(buf),
      "# Cost model inputs (%s): call %.1f us, hop %.1f us; 1 MiB hop %.2f GB/s, reduce %.2f "
      "GB/s; memory %.1f GB/s; %d cores\n",
      m.measured ? "measured by lanes-topo --probe" : "assumed: lanes-topo --probe measures them",
      m.callUs, m.hopLatencyUs, m.hopGBs[4], m.reduceGBs[4], m.memGBs, m.cores);
  return buf;
}

std::string jsonNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

}  // namespace

std::string formatPlanTable(const topo::Topology& t, int nranks, std::optional<CollType> coll) {
  const int gpus = static_cast<int>(t.gpus.size());
  const SelectionConfig config = configFor(t);
  std::string out = "# Path choice for " + std::to_string(nranks) +
                    " ranks as processes of this host (bytes per rank; src/planner/registry.h)";
  if (config.proto.set()) out += ", LANES_PROTO=" + config.proto.text();
  if (config.algo.set()) out += ", LANES_ALGO=" + config.algo.text();
  out += "\n" + inputsLine(config.machine);
  CallFacts facts = defaultFacts(nranks, gpus > 0 ? gpus : 1, config);
  if (coll) {
    out += "\n# " + std::string(collTypeName(*coll)) +
           ", size by size: device buffers, then host buffers (the choice; the next two)\n";
    for (size_t size : sweepSizes()) {
      CallFacts f = facts;
      f.coll = *coll;
      f.bytes = inputBytes(*coll, size, nranks);
      f.device = gpus > 0;
      const std::string device = gpus > 0 ? planName(f, config) : "-";
      f.device = false;
      char line[64];
      std::snprintf(line, sizeof(line), "%-8s %-16s ", sizeLabel(size).c_str(), device.c_str());
      out += line + explainHostChoice(f, config) + "\n";
    }
    return out;
  }
  if (gpus > 0) {
    out += "\n# Device buffers, rank r on GPU r % " + std::to_string(gpus) + "\n";
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

std::string formatPlanJson(const topo::Topology& t, int nranks, std::optional<CollType> coll) {
  const SelectionConfig config = configFor(t);
  const MachineFacts& m = config.machine;
  std::string out = "{\"format\": \"lanes-plan-1\", \"nranks\": " + std::to_string(nranks) +
                    ", \"inputs\": {\"measured\": " + (m.measured ? "true" : "false") +
                    ", \"call_us\": " + jsonNumber(m.callUs) +
                    ", \"hop_latency_us\": " + jsonNumber(m.hopLatencyUs) +
                    ", \"hop_gbps_1mib\": " + jsonNumber(m.hopGBs[4]) +
                    ", \"reduce_gbps_1mib\": " + jsonNumber(m.reduceGBs[4]) +
                    ", \"mem_gbps\": " + jsonNumber(m.memGBs) +
                    ", \"cores\": " + std::to_string(m.cores) + "}, \"host\": [";
  bool first = true;
  for (CollType c : kColls) {
    if (coll && c != *coll) continue;
    for (size_t size : sweepSizes()) {
      CallFacts f;
      f.coll = c;
      f.nranks = nranks;
      f.bytes = inputBytes(c, size, nranks);
      out += std::string(first ? "" : ",") + "\n  {\"collective\": \"" + collTypeName(c) +
             "\", \"size\": " + std::to_string(size) + ", \"chosen\": \"" +
             algoName(chooseHostAlgorithm(f, config).algo) + "\", \"candidates\": [";
      first = false;
      bool firstCandidate = true;
      for (const HostCandidate& h : rankHostAlgorithms(f, config)) {
        out += std::string(firstCandidate ? "" : ", ") + "{\"algo\": \"" + algoName(h.algo) +
               "\", \"predicted_us\": " + jsonNumber(h.cost.total() * 1e6) +
               ", \"latency_us\": " + jsonNumber(h.cost.latency * 1e6) +
               ", \"transfer_us\": " + jsonNumber(h.cost.transfer * 1e6) +
               ", \"reduce_us\": " + jsonNumber(h.cost.reduce * 1e6) + "}";
        firstCandidate = false;
      }
      out += "]}";
    }
  }
  return out + "\n]}\n";
}

}  // namespace lanes
