#include "transport/channel/submit_ledger.h"

#include <algorithm>
#include <thread>

namespace lanes {

SubmitLedger::SubmitLedger(size_t lines, std::chrono::milliseconds slice)
    : lines_(lines), slice_(slice), values_(std::make_unique<std::atomic<uint32_t>[]>(lines)) {
  for (size_t i = 0; i < lines; ++i) values_[i].store(0);
}

void SubmitLedger::post(size_t line, uint32_t value) {
  values_[line].store(value);
  // Paired with await: a sleeper registers before its last check, so either
  // it sees this value or this sees it (both sequentially consistent).
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    posted_.notify_all();
  }
}

void SubmitLedger::poison(const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!poisoned_.load()) why_ = why;
  poisoned_.store(true);
  posted_.notify_all();
}

std::string SubmitLedger::why() {
  std::lock_guard<std::mutex> lock(mutex_);
  return why_;
}

SubmitLedger::Wait SubmitLedger::await(size_t line, uint32_t value, Deadline deadline,
                                       const std::atomic<bool>* aborted) {
  // Peers normally post within microseconds (they are issuing the same
  // call): spin briefly before sleeping, as a wake-up costs tens of them.
  // Bounded by time, not by turns: on a loaded machine each yield can take
  // a scheduler tick.
  const auto spinUntil = std::min(deadline.at(), Clock::now() + std::chrono::microseconds(50));
  for (int i = 0; Clock::now() < spinUntil; ++i) {
    if (reached(line, value)) return Wait::Posted;
    if (poisoned_.load()) return Wait::Poisoned;
    if (i >= 64) std::this_thread::yield();
  }
  if (reached(line, value)) return Wait::Posted;
  std::unique_lock<std::mutex> lock(mutex_);
  sleepers_.fetch_add(1);
  Wait result = Wait::Posted;
  while (!reached(line, value)) {
    if (poisoned_.load()) {
      result = Wait::Poisoned;
      break;
    }
    if (aborted != nullptr && aborted->load()) {
      result = Wait::Aborted;
      break;
    }
    if (deadline.expired()) {
      result = Wait::TimedOut;
      break;
    }
    // Sliced (a lost notify costs at most a slice); the deadline may be "never".
    posted_.wait_until(lock, std::min(deadline.at(), Clock::now() + slice_));
  }
  sleepers_.fetch_sub(1);
  return result;
}

}  // namespace lanes
