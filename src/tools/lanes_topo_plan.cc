#include "tools/lanes_topo_plan.h"

#include <cstdio>
#include <vector>

#include "planner/registry.h"

namespace lanes {
namespace {

constexpr size_t kSizes[] = {8, size_t{64} << 10, size_t{1} << 20, size_t{256} << 20};
constexpr CollType kColls[] = {CollType::AllReduce, CollType::AllGather, CollType::ReduceScatter,
                               CollType::Broadcast, CollType::Reduce,    CollType::AlltoAll,
                               CollType::Gather,    CollType::Scatter};

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

std::string sizeLabel(size_t bytes) {
  return bytes >= (1 << 20) ? std::to_string(bytes >> 20) + " MiB"
         : bytes >= 1024    ? std::to_string(bytes >> 10) + " KiB"
                            : std::to_string(bytes) + " B";
}

std::string table(const CallFacts& base, const SelectionConfig& config) {
  char line[256];
  std::snprintf(line, sizeof(line), "%-14s", "collective");
  std::string out = line;
  for (size_t bytes : kSizes) {
    std::snprintf(line, sizeof(line), " %-20s", sizeLabel(bytes).c_str());
    out += line;
  }
  out += "\n";
  for (CollType coll : kColls) {
    std::snprintf(line, sizeof(line), "%-14s", collTypeName(coll));
    out += line;
    for (size_t bytes : kSizes) {
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

}  // namespace

std::string formatPlanTable(const topo::Topology& t, int nranks) {
  const int gpus = static_cast<int>(t.gpus.size());
  const SelectionConfig config = SelectionConfig::fromEnv();
  std::string out = "# Path choice for " + std::to_string(nranks) +
                    " ranks as processes of this host (bytes per rank; src/planner/registry.h)";
  if (config.proto.set()) out += ", LANES_PROTO=" + config.proto.text();
  if (config.algo.set()) out += ", LANES_ALGO=" + config.algo.text();
  out += "\n";
  CallFacts facts = defaultFacts(nranks, gpus > 0 ? gpus : 1, config);
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

}  // namespace lanes
