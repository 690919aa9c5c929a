// RankMeeting: the ranks of a communicator that are all threads of this
// process meet once per call; the last to arrive acts for all of them (with
// every rank's offer in hand) and every rank returns what that act returned.
//
// It serves ranks that share one CUDA context (exec/cuda/context_allreduce.h):
// the last arrival enqueues the whole call, every dependency an event that
// was already recorded, so no stream ever waits for work enqueued after it.
// The price, as for NCCL's blocking group semantics: a call returns only once
// every rank has made it (bounded by the communicator's timeout).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/status.h"

namespace lanes {

class RankMeeting {
 public:
  // The offers of ranks 0..n-1 (each points to the offering rank's own data,
  // alive until its meet returns).
  using Act = std::function<Status(const std::vector<const void*>& offers)>;

  // The meeting of communicator `commId` in this process (made by the first
  // rank to join).
  static std::shared_ptr<RankMeeting> join(uint64_t commId, int nranks);

  // `slice`: how often a waiting rank looks at the deadline and its abort
  // flag (poison and round completion wake it at once). Tests lengthen it.
  explicit RankMeeting(int nranks,
                       std::chrono::milliseconds slice = std::chrono::milliseconds(100));
  RankMeeting(const RankMeeting&) = delete;
  RankMeeting& operator=(const RankMeeting&) = delete;

  // Rank `rank` arrives with `offer`. The last arrival runs `act` (its own)
  // and all return its status. If not all arrive before `deadline`, the
  // meeting fails for good (lanesTimeout naming the missing ranks, `what`
  // saying which call); after poison() every meet fails with `why`. A
  // waiting rank whose `*aborted` turns true (its communicator was aborted)
  // leaves with an error.
  Status meet(int rank, const void* offer, Deadline deadline, const std::string& what,
              const Act& act, const std::atomic<bool>* aborted = nullptr);
  // Never waits for a round in progress (it runs from failure hooks, which
  // must not block behind an act's CUDA calls).
  void poison(const Status& why);

 private:
  int nranks_;
  std::chrono::milliseconds slice_;
  std::mutex mutex_;
  std::condition_variable met_;
  std::vector<const void*> offers_;  // null: not arrived in this round
  int arrived_ = 0;
  // Written under mutex_; read without it by the waiters' first spin.
  std::atomic<uint64_t> round_{0};
  static constexpr std::chrono::microseconds kSpin{100};
  Status result_;  // of the last completed round
  Status failed_;  // not OK: every meet fails with it (a timeout)
  // poison(): apart from mutex_, which an act holds.
  std::atomic<bool> poisoned_{false};
  std::mutex poisonMutex_;
  Status poisonWhy_;

  // failed_ or the poison; OK while the meeting works.
  Status failure();
};

}  // namespace lanes
