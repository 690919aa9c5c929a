// The host-staged path's four internal streams (docs/gpu_data_path.md,
// "Choreography"): down (A), upload (B1), reduce (B2) and up (C). A rank owns
// its set, or (LANES_STAGE_SHARED_STREAMS) the ranks of one communicator that
// are threads of this process on one GPU share one set: every stage of every
// rank then runs in the order the ranks issued it, one copy after another,
// the way separate processes' copies take turns on the engines. Safe because
// every counter wait is issued after the write it waits for (submit_ledger.h),
// so each stream's order is a topological order of the dependencies.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <mutex>

#include "base/status.h"

namespace lanes {

class StageStreams {
 public:
  static Status create(std::unique_ptr<StageStreams>* out);
  ~StageStreams();
  StageStreams(const StageStreams&) = delete;
  StageStreams& operator=(const StageStreams&) = delete;

  cudaStream_t down = nullptr, upload = nullptr, reduce = nullptr, up = nullptr;

 private:
  StageStreams() = default;
};

// One communicator's shared sets, one per GPU; held by its thread ranks
// (sharedPerCommunicator), destroyed with the last of them.
class SharedStageStreams {
 public:
  // The set of `device` (the caller's current GPU), made by the first caller.
  Status get(int device, StageStreams** out);

 private:
  std::mutex mutex_;
  std::map<int, std::unique_ptr<StageStreams>> byDevice_;
};

}  // namespace lanes
