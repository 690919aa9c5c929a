// StagedWatchdog: the host side of the host-staged path's failure handling.
// GPU streams of every local rank wait on the stage channel's counters in the
// shared arena (cuStreamWaitValue32; transport/channel/stage_channel.h). If a
// peer dies, aborts, or never calls the collective, those waits would park
// the streams forever. The watchdog
//  - poisons: on a communicator failure it stores a value far ahead of every
//    counter into all of them, and keeps re-storing it (a stream that runs
//    on may write a smaller value back) until the context is destroyed, so
//    every wait passes; results are garbage, the error is reported by
//    lanesCommGetAsyncError;
//  - times out: a batch whose streams started but did not finish within the
//    communicator's timeout fails the communicator (lanesTimeout), naming the
//    ranks whose counters lag, which in turn poisons.
// It is one thread per communicator that sleeps between 50 ms checks; it is
// never in a collective's critical path.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/deadline.h"
#include "base/status.h"
#include "exec/comm_view.h"
#include "transport/channel/stage_channel.h"

struct lanesComm;

namespace lanes {

class StagedWatchdog {
 public:
  // One enqueued batch: its first and last chunk counters and the events
  // bracketing it on the internal streams.
  struct Batch {
    cudaEvent_t start = nullptr;  // recorded on the user's stream before the batch
    cudaEvent_t done = nullptr;   // recorded on the last internal stream after it
    uint32_t lastChunk = 0;
    std::string label;
    // Says which counters lag; unset: the collective counters against lastChunk.
    std::function<std::string()> lag;
  };

  StagedWatchdog(CommView comm, const StageChannel* channel);
  ~StagedWatchdog();  // stops the thread; call drain() first
  StagedWatchdog(const StagedWatchdog&) = delete;
  StagedWatchdog& operator=(const StagedWatchdog&) = delete;

  // An event from the pool (or a new one), for a Batch.
  Status takeEvent(cudaEvent_t* out);
  void track(Batch batch);
  // A counter value this rank's streams may wait for: the collectives' chunk
  // g or a pair's sequence. Poison is set relative to the highest noted, so
  // it passes every wait of either kind.
  void noteChunk(uint32_t g) {
    uint32_t seen = lastIssued_.load(std::memory_order_relaxed);
    while (static_cast<int32_t>(g - seen) > 0 &&
           !lastIssued_.compare_exchange_weak(seen, g, std::memory_order_relaxed)) {
    }
  }
  // Starts poisoning now and until destruction. Safe from any thread and
  // from lanesComm::fail's hook (no locks taken).
  void poison();
  bool poisoned() const { return poisoned_.load(std::memory_order_acquire); }
  // Waits until every tracked batch finished or `deadline` passes.
  bool drain(Deadline deadline);

 private:
  void run();
  void retireFinished();  // under mutex_
  void checkStall(Clock::time_point now);
  std::string lagReport(uint32_t g) const;

  CommView comm_;
  const StageChannel* channel_;
  std::atomic<uint32_t> lastIssued_{0};
  std::atomic<bool> poisoned_{false};
  std::atomic<bool> stop_{false};

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Batch> pending_;
  Clock::time_point oldestStarted_{};
  bool oldestStartedKnown_ = false;
  bool timedOut_ = false;
  std::vector<cudaEvent_t> freeEvents_;
  std::thread thread_;
};

}  // namespace lanes
