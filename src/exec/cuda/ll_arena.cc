#include "exec/cuda/ll_arena.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "base/log.h"
#include "transport/common/agree.h"
#include "transport/common/numa_policy.h"

namespace lanes {
namespace {

std::string cudaText(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) + ")";
}

// Each rank's lines on its GPU's node, set on the creator's fresh mapping
// before fallocate allocates the pages. A slot pair shorter than a page
// shares pages with its neighbours: a page goes to the rank owning its first
// byte. Placement is a hint: a refusal is logged, not fatal.
void placeOnNodes(void* base, size_t bytes, size_t rankBytes, const std::vector<int>& rankNodes) {
  std::vector<NumaRange> wanted;
  for (size_t r = 0; r < rankNodes.size(); ++r)
    wanted.push_back({r * rankBytes, rankBytes, rankNodes[r]});
  const std::vector<NumaRange> ranges = pageAlignedRanges(std::move(wanted), bytes, 4096);
  const size_t online = onlineNumaNodes().size();
  if (online <= 1 || ranges.empty()) {
    LANES_INFO(Init, 0, "small-message arena: not placed by NUMA node (%s)",
               online <= 1 ? "this host has one NUMA node" : "the GPUs' NUMA nodes are unknown");
    return;
  }
  Status s = applyRanges(base, ranges);
  if (!s)
    LANES_WARN(Init, 0,
               "small-message arena: NUMA placement failed, pages stay where the kernel "
               "puts them (%s)",
               s.message().c_str());
  else
    LANES_INFO(Init, 0, "small-message arena: %s", describeRankNodes(rankNodes, "lines").c_str());
}

}  // namespace

Status LlArena::create(Bootstrap& bootstrap, const std::string& commTag, size_t bytes,
                       size_t rankBytes, const std::vector<int>& rankNodes, Deadline deadline,
                       std::unique_ptr<LlArena>* out, bool* fatal) {
  *fatal = false;
  const int rank = bootstrap.rank();
  std::unique_ptr<LlArena> arena(new LlArena());
  const std::string name = "/" + commTag + "-ll";

  Status local;
  if (rank == 0) {
    auto place = [&](void* base, size_t) { placeOnNodes(base, bytes, rankBytes, rankNodes); };
    local = ShmSegment::create(name, bytes, bytes, arena->segment_.get(), place);
    if (!local)
      local = Status(local.code(), "rank 0 could not create the " + std::to_string(bytes / 1024) +
                                       " KiB small-message arena " + name + ": " + local.message());
  }
  LANES_RETURN_IF_ERROR(
      agreeOnStatus(bootstrap, local, "create the small-message arena", deadline, fatal));

  if (rank != 0) {
    local = ShmSegment::open(name, bytes, arena->segment_.get());
    if (!local)
      local = Status(local.code(), "rank " + std::to_string(rank) +
                                       " could not map the small-message arena " + name + ": " +
                                       local.message());
  }
  Status mapped = agreeOnStatus(bootstrap, local, "map the small-message arena", deadline, fatal);
  arena->segment_->unlink();  // everyone mapped it (or gave up): the name can go
  LANES_RETURN_IF_ERROR(mapped);

  // Each mapping is registered by its own rank (threads of one process hold
  // separate mappings of the same pages).
  cudaError_t err = cudaHostRegister(arena->segment_->data(), bytes,
                                     cudaHostRegisterPortable | cudaHostRegisterMapped);
  if (err == cudaSuccess) {
    arena->registered_ = true;
    err = cudaHostGetDevicePointer(&arena->device_, arena->segment_->data(), 0);
  }
  if (err != cudaSuccess) {
    local = cudaError("rank " + std::to_string(rank) + ": registering the " +
                      std::to_string(bytes / 1024) + " KiB small-message arena with CUDA failed: " +
                      cudaText(err) + "; check the locked-memory limit (ulimit -l)");
    cudaGetLastError();  // not sticky: later calls must not see it
  }
  LANES_RETURN_IF_ERROR(agreeOnStatus(
      bootstrap, local, "register the small-message arena with CUDA", deadline, fatal));
  *out = std::move(arena);
  return Status::ok();
}

LlArena::~LlArena() {
  if (leaked_) {
    // A kernel may still read or write these pages: keep them mapped and
    // registered for the life of the process rather than let the GPU fault.
    (void)segment_.release();  // intentional leak, see above
    return;
  }
  if (registered_) cudaHostUnregister(segment_->data());
}

}  // namespace lanes
