#include "transport/hoststage/host_arena.h"

#include <cuda_runtime.h>

#include <utility>

#include "base/log.h"
#include "transport/common/agree.h"

namespace lanes {
namespace {

std::string sizeText(size_t bytes) {
  constexpr size_t kMiB = size_t{1} << 20;
  return bytes >= kMiB ? std::to_string(bytes / kMiB) + " MiB"
                       : std::to_string(bytes / 1024) + " KiB";
}

// Sets each range's preferred node on the creator's fresh mapping, before
// fallocate allocates the pages. Placement is a hint: a refusal costs
// bandwidth, not correctness, so it is logged.
void placeOnNodes(void* base, const HostArenaSpec& spec) {
  const size_t online = onlineNumaNodes().size();
  if (online <= 1 || spec.placement.empty()) {
    LANES_INFO(Init, 0, "%s: not placed by NUMA node (%s)", spec.what.c_str(),
               online <= 1 ? "this host has one NUMA node" : "the GPUs' NUMA nodes are unknown");
    return;
  }
  Status s = applyRanges(base, spec.placement);
  if (!s)
    LANES_WARN(Init, 0, "%s: NUMA placement failed, pages stay where the kernel puts them (%s)",
               spec.what.c_str(), s.message().c_str());
  else
    LANES_INFO(Init, 0, "%s: %s", spec.what.c_str(), spec.placed.c_str());
}

}  // namespace

Status HostArena::create(Bootstrap& bootstrap, const HostArenaSpec& spec, Deadline deadline,
                         std::unique_ptr<HostArena>* out, bool* fatal) {
  *fatal = false;
  const int rank = bootstrap.rank();
  std::unique_ptr<HostArena> arena(new HostArena());
  const std::string what = spec.what + " " + spec.name;

  // 1. The lowest rank creates and reserves it (zero-filled: every counter
  //    starts at 0), its pages placed first.
  Status local;
  if (rank == 0) {
    auto place = [&spec](void* base, size_t) { placeOnNodes(base, spec); };
    local = ShmSegment::create(spec.name, spec.bytes, spec.bytes, arena->segment_.get(), place);
    if (!local)
      local = Status(local.code(), "rank 0 could not create the " + sizeText(spec.bytes) + " " +
                                       what + ": " + local.message() + spec.createHint);
  }
  LANES_RETURN_IF_ERROR(
      agreeOnStatus(bootstrap, local, ("create the " + spec.what).c_str(), deadline, fatal));

  // 2. The others map it; 3. then the name can go (everyone mapped it or gave up).
  if (rank != 0) {
    local = ShmSegment::open(spec.name, spec.bytes, arena->segment_.get());
    if (!local)
      local = Status(local.code(), "rank " + std::to_string(rank) + " could not map the " + what +
                                       ": " + local.message());
  }
  Status mapped =
      agreeOnStatus(bootstrap, local, ("map the " + spec.what).c_str(), deadline, fatal);
  arena->segment_->unlink();
  LANES_RETURN_IF_ERROR(mapped);

  // 4. Each mapping is registered by its own rank.
  cudaError_t err = cudaHostRegister(arena->segment_->data(), spec.bytes,
                                     cudaHostRegisterPortable | cudaHostRegisterMapped);
  if (err == cudaSuccess) {
    arena->registered_ = true;
    err = cudaHostGetDevicePointer(&arena->device_, arena->segment_->data(), 0);
  }
  if (err != cudaSuccess) {
    local = cudaError("rank " + std::to_string(rank) + ": registering the " + sizeText(spec.bytes) +
                      " " + what + " with CUDA failed: " + cudaGetErrorName(err) + " (" +
                      cudaGetErrorString(err) + "); check the locked-memory limit (ulimit -l)" +
                      spec.registerHint);
    cudaGetLastError();  // not sticky: later calls must not see it
  }
  LANES_RETURN_IF_ERROR(agreeOnStatus(
      bootstrap, local, ("register the " + spec.what + " with CUDA").c_str(), deadline, fatal));
  *out = std::move(arena);
  return Status::ok();
}

HostArena::~HostArena() {
  if (leaked_) {
    // A stream may still read or write these pages: keep them mapped and
    // pinned for the life of the process rather than let the GPU fault.
    (void)segment_.release();  // intentional leak, see above
    return;
  }
  if (registered_) cudaHostUnregister(segment_->data());
}

}  // namespace lanes
