// HostArena: one block of shared host memory that every rank of a host maps
// and whose GPU reads and writes it through a device pointer: the host-staged
// transport's arena and the LL kernel's lines both are one. A SharedBlock
// (transport/shm/shared_block.h: created, placed by NUMA node, mapped and
// unlinked, each step agreed) that each rank then registers with CUDA for
// its own mapping (threads of one process hold separate mappings of the same
// pages); the registration ends in one agreement too.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "base/deadline.h"
#include "base/status.h"
#include "bootstrap/bootstrap.h"
#include "transport/shm/shared_block.h"

namespace lanes {

struct HostArenaSpec : SharedBlockSpec {
  // Appended to a failure to register it: what sizes it and what the user can change.
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

  std::byte* host() const { return block_->data(); }
  void* device() const { return device_; }  // the same bytes as the GPU addresses them
  size_t bytes() const { return block_->bytes(); }
  // Keeps the pages mapped and registered for the life of the process: a
  // stream or kernel may still touch them after the destroy deadline.
  void leak() {
    leaked_ = true;
    block_->leak();
  }

 private:
  HostArena() = default;

  std::unique_ptr<SharedBlock> block_;
  void* device_ = nullptr;
  bool registered_ = false;
  bool leaked_ = false;
};

}  // namespace lanes
