// SharedBlock: one block of POSIX shared memory that every rank of a
// communicator (all on one host) maps: the lowest rank creates and reserves
// it (posix_fallocate: a full /dev/shm fails here, not with SIGBUS later)
// after setting each range's preferred NUMA node on the fresh mapping, every
// other rank maps it, and the name goes once all have mapped it, so nothing
// is left in /dev/shm even when a rank dies later. Every step ends in one
// agreement, so all ranks get the same outcome. Threads of one process hold
// separate mappings of the same pages. CPU only: the host-staged arena
// (transport/hoststage/host_arena.h) registers one with CUDA; host
// summation of host buffers (transport/shm/sum_arena.h) uses one as it is.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/status.h"
#include "bootstrap/bootstrap.h"
#include "transport/common/numa_policy.h"
#include "transport/shm/shm_segment.h"

namespace lanes {

struct SharedBlockSpec {
  std::string name;  // the shm name, "/lanes-<commId hex>-<use>"
  std::string what;  // "host-staging arena": the messages' name for it
  size_t bytes = 0;
  // Preferred NUMA node per range (pageAlignedRanges); empty: the kernel
  // places the pages.
  std::vector<NumaRange> placement;
  std::string placed;  // the INFO line's text once the placement is set
  // Appended to a failure to create it: what sizes it and what the user can change.
  std::string createHint;
};

class SharedBlock {
 public:
  // Collective over `bootstrap`. On failure every rank returns an error;
  // *fatal is set when the bootstrap itself failed (a peer died or timed
  // out), so the ranks may disagree and the communicator must be failed
  // rather than fall back. The block starts zero-filled.
  static Status create(Bootstrap& bootstrap, const SharedBlockSpec& spec, Deadline deadline,
                       std::unique_ptr<SharedBlock>* out, bool* fatal);
  SharedBlock(const SharedBlock&) = delete;
  SharedBlock& operator=(const SharedBlock&) = delete;

  std::byte* data() const { return static_cast<std::byte*>(segment_->data()); }
  size_t bytes() const { return segment_->size(); }
  // Keeps the mapping for the life of the process (a GPU may still touch it).
  void leak() { leaked_ = true; }
  ~SharedBlock();

 private:
  SharedBlock() = default;
  std::unique_ptr<ShmSegment> segment_ = std::make_unique<ShmSegment>();
  bool leaked_ = false;
};

// "12 MiB", "64 KiB": sizes in the messages about shared blocks.
std::string sharedSizeText(size_t bytes);

}  // namespace lanes
