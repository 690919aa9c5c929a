#include "exec/rank_meeting.h"

#include <algorithm>
#include <thread>

#include "exec/per_communicator.h"

namespace lanes {

std::shared_ptr<RankMeeting> RankMeeting::join(uint64_t commId, int nranks) {
  return sharedPerCommunicator<RankMeeting>(commId, nranks);
}

RankMeeting::RankMeeting(int nranks, std::chrono::milliseconds slice)
    : nranks_(nranks), slice_(slice), offers_(static_cast<size_t>(nranks), nullptr) {}

void RankMeeting::poison(const Status& why) {
  {
    std::lock_guard<std::mutex> lock(poisonMutex_);
    if (poisoned_.load()) return;
    poisonWhy_ = why;
    poisoned_.store(true);
  }
  // Without mutex_: a waiter between its check and its wait misses this and
  // sees the poison at its next slice.
  met_.notify_all();
}

Status RankMeeting::failure() {
  if (!failed_) return failed_;
  if (poisoned_.load()) {
    std::lock_guard<std::mutex> lock(poisonMutex_);
    return poisonWhy_;
  }
  return Status::ok();
}

Status RankMeeting::meet(int rank, const void* offer, Deadline deadline, const std::string& what,
                         const Act& act, const std::atomic<bool>* aborted) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (Status f = failure(); !f) return f;
  if (offers_[static_cast<size_t>(rank)] != nullptr)
    return internalError("rank " + std::to_string(rank) + " arrived twice at one meeting");
  offers_[static_cast<size_t>(rank)] = offer;
  if (++arrived_ == nranks_) {
    // Everyone else waits for this: acting under the lock keeps the round's
    // offers (the waiters' stack data) alive and unchanged meanwhile.
    result_ = act(offers_);
    std::fill(offers_.begin(), offers_.end(), nullptr);
    arrived_ = 0;
    ++round_;
    met_.notify_all();
    return result_;
  }
  const uint64_t round = round_.load();
  // The peers usually arrive, and the act ends, within tens of µs (the act
  // is a few CUDA calls per rank): look for the round's end without
  // sleeping first, as a wake-up costs about as much. Bounded by time: on a
  // loaded machine each yield can take a scheduler tick.
  lock.unlock();
  const auto spinUntil = std::min(deadline.at(), Clock::now() + kSpin);
  for (int i = 0; Clock::now() < spinUntil; ++i) {
    if (round_.load() != round || poisoned_.load()) break;
    if (i >= 64) std::this_thread::yield();
  }
  lock.lock();
  Status leave;
  while (round_.load() == round) {
    if (leave = failure(); !leave) break;
    if (aborted != nullptr && aborted->load()) {
      leave = Status(lanesInvalidUsage, what +
                                            ": the communicator was aborted (lanesCommAbort) "
                                            "while this rank waited for its peers");
      break;
    }
    if (deadline.expired()) {
      std::string missing;
      for (int r = 0; r < nranks_; ++r)
        if (offers_[static_cast<size_t>(r)] == nullptr)
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      failed_ = timeoutError(what + ": rank(s) " + missing +
                             " (threads of this process) did not make the same call within "
                             "LANES_TIMEOUT. Every rank must issue the same collectives in the "
                             "same order.");
      leave = failed_;
      break;
    }
    met_.wait_until(lock, std::min(deadline.at(), Clock::now() + slice_));
  }
  if (round_.load() != round) return result_;
  // Leaving before the round completed: take the offer back (it dies with
  // this call), so no later arrival acts on it.
  offers_[static_cast<size_t>(rank)] = nullptr;
  --arrived_;
  met_.notify_all();
  return leave;
}

}  // namespace lanes
