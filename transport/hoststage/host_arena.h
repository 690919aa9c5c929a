// HostArena: one block of shared host memory that every rank of a host maps
// and whose GPU reads and writes it through a device pointer: the host-staged
// transport's arena and the LL kernel's lines both are one. Rank 0 creates
// the POSIX shm segment (posix_fallocate: a full /dev/shm fails here, not
// with SIGBUS later), after setting each range's preferred NUMA node on the
// fresh mapping; every other rank maps it; the name goes once all have mapped
// it, so nothing is left in /dev/shm even when a rank dies later. Each
// mapping is registered with CUDA by its own rank (threads of one process
// hold separate mappings of the same pages). Every step ends in one
// agreement, so all ranks get the same outcome.
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

struct HostArenaSpec {
  std::string name;  // the shm name, "/lanes-<commId hex>-<use>"
  std::string what;  // "host-staging arena": the messages' name for it
  size_t bytes = 0;
  // Preferred NUMA node per range (pageAlignedRanges); empty: the GPUs'
  // nodes are unknown and the kernel places the pages.
  std::vector<NumaRange> placement;
  std::string placed;  // the INFO line's text once the placement is set
  // Appended to a failure to create or to register it: what sizes the arena
  // and what the user can change.
  std::string createHint;
  std::string registerHint;
};

class HostArena {
 public:
  // Collective over `bootstrap`. On failure every rank returns an error;
  // *fatal is set when the bootstrap itself failed (a peer died or timed
  // out), so the ranks may disagree and the communicator must be failed
  // rather than fall back.
  static Status create(Bootstrap& bootstrap, const HostArenaSpec& spec, Deadline deadline,
                       std::unique_ptr<HostArena>* out, bool* fatal);
  ~HostArena();
  HostArena(const HostArena&) = delete;
  HostArena& operator=(const HostArena&) = delete;

  std::byte* host() const { return static_cast<std::byte*>(segment_->data()); }
  void* device() const { return device_; }  // the same bytes as the GPU addresses them
  size_t bytes() const { return segment_->size(); }
  // Keeps the pages mapped and registered for the life of the process: a
  // stream or kernel may still touch them after the destroy deadline.
  void leak() { leaked_ = true; }

 private:
  HostArena() = default;

  std::unique_ptr<ShmSegment> segment_ = std::make_unique<ShmSegment>();
  void* device_ = nullptr;
  bool registered_ = false;
  bool leaked_ = false;
};

}  // namespace lanes
