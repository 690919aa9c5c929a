#include "transport/shm/shared_block.h"

#include <utility>

#include "base/log.h"
#include "transport/common/agree.h"

namespace lanes {
namespace {

// Sets each range's preferred node on the creator's fresh mapping, before
// fallocate allocates the pages. Placement is a hint: a refusal costs
// bandwidth, not correctness, so it is logged.
void placeOnNodes(void* base, const SharedBlockSpec& spec) {
  const size_t online = onlineNumaNodes().size();
  if (online <= 1 || spec.placement.empty()) {
    LANES_INFO(Init, 0, "%s: not placed by NUMA node (%s)", spec.what.c_str(),
               online <= 1 ? "this host has one NUMA node" : "the ranks' NUMA nodes are unknown");
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

std::string sharedSizeText(size_t bytes) {
  constexpr size_t kMiB = size_t{1} << 20;
  return bytes >= kMiB ? std::to_string(bytes / kMiB) + " MiB"
                       : std::to_string(bytes / 1024) + " KiB";
}

Status SharedBlock::create(Bootstrap& bootstrap, const SharedBlockSpec& spec, Deadline deadline,
                           std::unique_ptr<SharedBlock>* out, bool* fatal) {
  *fatal = false;
  const int rank = bootstrap.rank();
  std::unique_ptr<SharedBlock> block(new SharedBlock());
  const std::string what = spec.what + " " + spec.name;

  // 1. The lowest rank creates and reserves it (zero-filled), its pages placed first.
  Status local;
  if (rank == 0) {
    auto place = [&spec](void* base, size_t) { placeOnNodes(base, spec); };
    local = ShmSegment::create(spec.name, spec.bytes, spec.bytes, block->segment_.get(), place);
    if (!local)
      local = Status(local.code(), "rank 0 could not create the " + sharedSizeText(spec.bytes) +
                                       " " + what + ": " + local.message() + spec.createHint);
  }
  LANES_RETURN_IF_ERROR(
      agreeOnStatus(bootstrap, local, ("create the " + spec.what).c_str(), deadline, fatal));

  // 2. The others map it; 3. then the name can go (everyone mapped it or gave up).
  if (rank != 0) {
    local = ShmSegment::open(spec.name, spec.bytes, block->segment_.get());
    if (!local)
      local = Status(local.code(), "rank " + std::to_string(rank) + " could not map the " + what +
                                       ": " + local.message());
  }
  Status mapped =
      agreeOnStatus(bootstrap, local, ("map the " + spec.what).c_str(), deadline, fatal);
  block->segment_->unlink();
  LANES_RETURN_IF_ERROR(mapped);
  *out = std::move(block);
  return Status::ok();
}

SharedBlock::~SharedBlock() {
  // Intentional: a stream or kernel may still touch these pages after a
  // destroy's deadline, so they stay mapped for the life of the process.
  if (leaked_) (void)segment_.release();
}

}  // namespace lanes
