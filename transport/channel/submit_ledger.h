// SubmitLedger: the order in which thread ranks of one process put their
// counter writes on their streams.
//
// Ranks that are threads of one process share its CUDA context, and with it
// the context's hardware queues: CUDA maps streams to queues by creation
// order, and a queue runs the work of all its streams in submission order.
// A stream parked on a peer's counter (cuStreamWaitValue32) therefore holds
// up whatever sits behind it in its queue, possibly the peer's very write.
// That cannot happen if every wait is submitted after the write it waits
// for: then, in every queue, the write is ahead of the wait or in another
// queue, and by induction over submission order all work completes. The
// ledger enforces exactly that: a rank posts each counter value once its
// write is on a stream, and before enqueueing a wait for a counter that
// another rank of this process writes, it waits here (on the host, bounded)
// until that value was posted. The price: a thread rank's call blocks until
// its peers of this process have issued the matching part of the same call.
//
// One ledger per communicator and process, shared by its thread ranks (the
// staged path finds it by the communicator's id); lines are the staging
// arena's counter lines (StageArenaLayout), posted and awaited by the staged
// channels (stage_channel.h).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "base/deadline.h"

namespace lanes {

class SubmitLedger {
 public:
  enum class Wait { Posted, Poisoned, TimedOut, Aborted };

  // `slice`: how often a sleeping wait looks at the deadline and its abort
  // flag (posts and poison wake it at once). Tests lengthen it.
  explicit SubmitLedger(size_t lines,
                        std::chrono::milliseconds slice = std::chrono::milliseconds(100));
  SubmitLedger(const SubmitLedger&) = delete;
  SubmitLedger& operator=(const SubmitLedger&) = delete;

  // `value` of counter `line` is on a stream now (values only grow, modulo 2^32).
  void post(size_t line, uint32_t value);
  // Until `line` was posted at least `value` ((int32_t)(posted - value) >= 0,
  // as the stream waits compare), the ledger is poisoned, `deadline`, or
  // `*aborted` turns true (the waiting rank's communicator was aborted).
  Wait await(size_t line, uint32_t value, Deadline deadline,
             const std::atomic<bool>* aborted = nullptr);
  // The communicator failed (`why`): every wait returns Poisoned from now on.
  void poison(const std::string& why);
  bool poisoned() const { return poisoned_.load(); }
  std::string why();
  // The highest value posted on `line` (for error messages).
  uint32_t posted(size_t line) const { return values_[line].load(); }
  size_t lines() const { return lines_; }

 private:
  bool reached(size_t line, uint32_t value) const {
    return static_cast<int32_t>(values_[line].load() - value) >= 0;
  }

  size_t lines_;
  std::chrono::milliseconds slice_;
  std::unique_ptr<std::atomic<uint32_t>[]> values_;
  std::atomic<bool> poisoned_{false};
  std::string why_;  // under mutex_
  std::atomic<int> sleepers_{0};
  std::mutex mutex_;
  std::condition_variable posted_;
};

}  // namespace lanes
