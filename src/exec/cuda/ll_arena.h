// LlArena: the shared host memory of the small-message (LL) all-reduce. One
// POSIX shm segment per communicator, "/lanes-<commId>-ll", holding every
// rank's two LL slots (ll_allreduce.h has the line format), mapped by every
// rank of the host and registered with CUDA (portable, mapped) by each
// mapping, so every rank's kernel reads and writes it through a device
// pointer. Rank 0 creates and zero-fills it (posix_fallocate: a full /dev/shm
// fails here, not with SIGBUS later); the name is removed once every rank has
// mapped it, so nothing is left in /dev/shm even if a rank dies later.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/status.h"
#include "bootstrap/bootstrap.h"
#include "transport/shm/shm_segment.h"

namespace lanes {

class LlArena {
 public:
  // Collective over `bootstrap`. Every rank gets the same outcome; *fatal is
  // set when the bootstrap itself failed (the ranks may disagree then, so
  // the communicator must be failed rather than fall back).
  // Rank r's lines are bytes [r * rankBytes, (r + 1) * rankBytes); rank 0
  // prefers rankNodes[r] (its GPU's NUMA node, -1 unknown; size nranks or
  // empty) for their pages before it allocates them.
  static Status create(Bootstrap& bootstrap, const std::string& commTag, size_t bytes,
                       size_t rankBytes, const std::vector<int>& rankNodes, Deadline deadline,
                       std::unique_ptr<LlArena>* out, bool* fatal);
  ~LlArena();
  LlArena(const LlArena&) = delete;
  LlArena& operator=(const LlArena&) = delete;

  // The segment as the GPU addresses it.
  void* device() const { return device_; }
  size_t bytes() const { return segment_->size(); }
  // Keeps the pages mapped and registered for the life of the process: a
  // kernel may still touch them after the destroy deadline.
  void leak() { leaked_ = true; }

 private:
  LlArena() = default;

  std::unique_ptr<ShmSegment> segment_ = std::make_unique<ShmSegment>();
  void* device_ = nullptr;
  bool registered_ = false;
  bool leaked_ = false;
};

}  // namespace lanes
