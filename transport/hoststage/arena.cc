#include "transport/hoststage/arena.h"

#include <vector>

#include "transport/common/numa_policy.h"
#include "transport/hoststage/arena_placement.h"

namespace lanes {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

}  // namespace

Status StageArena::create(Bootstrap& bootstrap, const std::string& commTag,
                          const StageArenaConfig& config, const std::vector<int>& rankNodes,
                          Deadline deadline, std::unique_ptr<StageArena>* out, bool* fatal) {
  const StageArenaLayout layout(bootstrap.nranks(), config);
  HostArenaSpec spec;
  spec.name = "/" + commTag + "-stage";
  spec.what = "host-staging arena";
  spec.bytes = layout.totalBytes();
  spec.placement = stageArenaPlacement(layout, rankNodes);
  const int shared = stageArenaSharedNode(rankNodes);
  spec.placed = layout.hostData
                    ? describeRankNodes(rankNodes, "slots") + "; results and flags on NUMA node " +
                          std::to_string(shared)
                    : "slots in GPU memory; flags on NUMA node " + std::to_string(shared);
  spec.createHint = " (" + std::to_string(layout.nranks) +
                    " ranks x LANES_STAGE_SLOTS=" + std::to_string(layout.slots) +
                    " x LANES_STAGE_CHUNK_BYTES=" + std::to_string(layout.chunkBytes) +
                    " plus results, plus " + std::to_string(layout.pairBytes() / kMiB) +
                    " MiB of send/recv pair slots, LANES_STAGE_PAIR_CHUNK_BYTES). Make /dev/shm "
                    "larger or lower those variables (all ranks alike).";
  spec.registerHint = " or lower LANES_STAGE_CHUNK_BYTES / LANES_STAGE_SLOTS";
  std::unique_ptr<HostArena> memory;
  LANES_RETURN_IF_ERROR(HostArena::create(bootstrap, spec, deadline, &memory, fatal));
  out->reset(new StageArena(layout, std::move(memory)));
  return Status::ok();
}

}  // namespace lanes
