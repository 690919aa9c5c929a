#include "transport/hoststage/arena.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "base/env.h"
#include "base/log.h"
#include "transport/common/agree.h"
#include "transport/common/numa_policy.h"
#include "transport/hoststage/arena_placement.h"

namespace lanes {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kMiB = size_t{1} << 20;

size_t roundUp(size_t v, size_t m) { return (v + m - 1) / m * m; }

// Sets each range's preferred node on the creator's fresh mapping (before
// any page exists: the shared policy steers fallocate) and says where the
// arena went. A refused placement costs bandwidth, not correctness: warn.
void placeOnNodes(void* base, const StageArenaLayout& layout, const std::vector<int>& rankNodes) {
  const std::vector<NumaRange> ranges = stageArenaPlacement(layout, rankNodes);
  const size_t online = onlineNumaNodes().size();
  const bool anyKnown = !ranges.empty();
  if (online <= 1 || !anyKnown) {
    LANES_INFO(Init, 0, "staging arena: not placed by NUMA node (%s)",
               online <= 1 ? "this host has one NUMA node" : "the GPUs' NUMA nodes are unknown");
    return;
  }
  Status s = applyRanges(base, ranges);
  if (!s) {
    LANES_WARN(Init, 0,
               "staging arena: NUMA placement failed, pages stay where the kernel puts them "
               "(%s)",
               s.message().c_str());
    return;
  }
  const int shared = stageArenaSharedNode(rankNodes);
  if (layout.hostData)
    LANES_INFO(Init, 0, "staging arena: %s; results and flags on NUMA node %d",
               describeRankNodes(rankNodes, "slots").c_str(), shared);
  else
    LANES_INFO(Init, 0, "staging arena: slots in GPU memory; flags on NUMA node %d", shared);
}

}  // namespace

StageArenaConfig StageArenaConfig::fromEnv() {
  StageArenaConfig c;
  // Rounding up to whole pages is documented, not a correction: no warning.
  constexpr uint64_t kMinChunk = 64 * 1024;
  c.chunkBytes = roundUp(envSize("LANES_STAGE_CHUNK_BYTES", c.chunkBytes, kMinChunk), kPage);
  size_t pairChunk = envSize("LANES_STAGE_PAIR_CHUNK_BYTES", 2 * kMiB);
  if (pairChunk != 0 && pairChunk < kMinChunk) {  // 0 is allowed: no pair slots
    envWarnOnce("LANES_STAGE_PAIR_CHUNK_BYTES", envString("LANES_STAGE_PAIR_CHUNK_BYTES").value(),
                "is below its minimum 64K (or 0: no pair slots)", "64K");
    pairChunk = kMinChunk;
  }
  c.pairChunkBytes = pairChunk == 0 ? 0 : roundUp(pairChunk, kPage);
  c.slots = static_cast<int>(envInt("LANES_STAGE_SLOTS", c.slots, 2, 64));
  return c;
}

Status StageArena::create(Bootstrap& bootstrap, const std::string& commTag,
                          const StageArenaConfig& config, const std::vector<int>& rankNodes,
                          Deadline deadline, std::unique_ptr<StageArena>* out, bool* fatal) {
  *fatal = false;
  const int rank = bootstrap.rank();
  StageArenaLayout layout(bootstrap.nranks(), config);
  std::unique_ptr<StageArena> arena(new StageArena(layout));
  arena->segment_ = std::make_unique<ShmSegment>();
  const std::string name = "/" + commTag + "-stage";
  const size_t bytes = layout.totalBytes();

  // 1. The lowest rank creates and reserves the segment (zero-filled: every
  //    counter starts at 0), placing the pages on NUMA nodes first.
  Status local;
  if (rank == 0) {
    auto place = [&](void* base, size_t) { placeOnNodes(base, layout, rankNodes); };
    local = ShmSegment::create(name, bytes, bytes, arena->segment_.get(), place);
    if (!local)
      local = Status(
          local.code(),
          "rank 0 could not create the " + std::to_string(bytes / kMiB) +
              " MiB host-staging arena (" + std::to_string(layout.nranks) +
              " ranks x LANES_STAGE_SLOTS=" + std::to_string(layout.slots) +
              " x LANES_STAGE_CHUNK_BYTES=" + std::to_string(layout.chunkBytes) +
              " plus results, plus " + std::to_string(layout.pairBytes() / kMiB) +
              " MiB of send/recv pair slots, LANES_STAGE_PAIR_CHUNK_BYTES): " + local.message() +
              " Make /dev/shm larger or lower those variables (all ranks alike).");
  }
  LANES_RETURN_IF_ERROR(
      agreeOnStatus(bootstrap, local, "create the host-staging arena", deadline, fatal));

  // 2. The others map it.
  if (rank != 0) {
    local = ShmSegment::open(name, bytes, arena->segment_.get());
    if (!local)
      local = Status(local.code(), "rank " + std::to_string(rank) +
                                       " could not map the host-staging arena: " + local.message());
  }
  Status mapped = agreeOnStatus(bootstrap, local, "map the host-staging arena", deadline, fatal);
  // 3. Everyone has mapped it (or given up): the name can go.
  arena->segment_->unlink();
  LANES_RETURN_IF_ERROR(mapped);

  // 4. Each mapping is registered once (threads of one process hold separate
  //    mappings of the same pages, each registered by its own rank).
  cudaError_t err = cudaHostRegister(arena->segment_->data(), bytes,
                                     cudaHostRegisterPortable | cudaHostRegisterMapped);
  if (err == cudaSuccess) {
    arena->registered_ = true;
  } else {
    local = cudaError("rank " + std::to_string(rank) + ": cudaHostRegister of the " +
                      std::to_string(bytes / kMiB) + " MiB host-staging arena failed: " +
                      cudaGetErrorName(err) + " (" + cudaGetErrorString(err) +
                      "); check the locked-memory limit (ulimit -l) or lower "
                      "LANES_STAGE_CHUNK_BYTES / LANES_STAGE_SLOTS");
    cudaGetLastError();  // not sticky: clear it so later calls don't see it
  }
  LANES_RETURN_IF_ERROR(agreeOnStatus(bootstrap, local, "register the host-staging arena with CUDA",
                                      deadline, fatal));
  *out = std::move(arena);
  return Status::ok();
}

StageArena::~StageArena() {
  if (leaked_) {
    // A stream may still read or write these pages: keep them mapped and
    // pinned for the life of the process rather than let the GPU fault.
    (void)segment_.release();  // intentional leak, see above
    return;
  }
  if (registered_) cudaHostUnregister(segment_->data());
}

}  // namespace lanes
