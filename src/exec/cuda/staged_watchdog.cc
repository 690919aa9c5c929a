#include "exec/cuda/staged_watchdog.h"

#include <chrono>

#include "base/cuda_check.h"
#include "base/log.h"

namespace lanes {
namespace {

// Far ahead of any counter a live stream waits for (waits compare
// (int32_t)(flag - value) >= 0), yet not so far that it wraps behind them.
constexpr uint32_t kPoisonLead = 0x40000000u;

bool finished(cudaEvent_t ev) {
  cudaError_t q = cudaEventQuery(ev);
  if (q == cudaErrorNotReady) return false;
  if (q != cudaSuccess) cudaGetLastError();  // a failed context: nothing will run any more
  return true;
}

}  // namespace

StagedWatchdog::StagedWatchdog(CommView comm, const StageChannel* channel)
    : comm_(comm), channel_(channel) {
  thread_ = std::thread([this] { run(); });
}

StagedWatchdog::~StagedWatchdog() {
  stop_.store(true);
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (Batch& b : pending_) {
    // Destroying a recorded event is deferred by CUDA until it completes.
    cudaEventDestroy(b.start);
    cudaEventDestroy(b.done);
  }
  for (cudaEvent_t ev : freeEvents_) cudaEventDestroy(ev);
}

Status StagedWatchdog::takeEvent(cudaEvent_t* out) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!freeEvents_.empty()) {
      *out = freeEvents_.back();
      freeEvents_.pop_back();
      return Status::ok();
    }
  }
  LANES_CUDA_RETURN(cudaEventCreateWithFlags(out, cudaEventDisableTiming));
  return Status::ok();
}

void StagedWatchdog::track(Batch batch) {
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.push_back(std::move(batch));
}

void StagedWatchdog::poison() {
  channel_->poisonAll(lastIssued_.load(std::memory_order_relaxed) + kPoisonLead);
  poisoned_.store(true, std::memory_order_release);
  wake_.notify_all();
}

bool StagedWatchdog::drain(Deadline deadline) {
  Backoff backoff;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      retireFinished();
      if (pending_.empty()) return true;
    }
    if (deadline.expired()) return false;
    backoff.pause();
  }
}

void StagedWatchdog::retireFinished() {
  while (!pending_.empty() && finished(pending_.front().done)) {
    freeEvents_.push_back(pending_.front().start);
    freeEvents_.push_back(pending_.front().done);
    pending_.pop_front();
    oldestStartedKnown_ = false;
  }
}

void StagedWatchdog::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_.load()) {
    bool poisoned = poisoned_.load(std::memory_order_acquire);
    wake_.wait_for(lock, poisoned ? std::chrono::milliseconds(1) : std::chrono::milliseconds(50));
    if (stop_.load()) break;
    if (poisoned_.load(std::memory_order_acquire)) {
      // Streams that were released write their (smaller) counters back;
      // store the poison again until this context is destroyed.
      channel_->poisonAll(lastIssued_.load(std::memory_order_relaxed) + kPoisonLead);
      continue;
    }
    retireFinished();
    if (pending_.empty() || timedOut_) continue;
    const Batch& oldest = pending_.front();
    auto now = Clock::now();
    if (!oldestStartedKnown_) {
      // The clock runs from when the user's stream reached the batch, not
      // from the enqueue: earlier work on that stream may take any time.
      if (finished(oldest.start)) {
        oldestStarted_ = now;
        oldestStartedKnown_ = true;
      }
      continue;
    }
    double waited = std::chrono::duration<double>(now - oldestStarted_).count();
    if (waited < comm_.timeoutSeconds()) continue;
    timedOut_ = true;
    std::string message =
        oldest.label + " on " + comm_.describe() + " made no progress for " +
        std::to_string(static_cast<int>(waited)) +
        " s (LANES_TIMEOUT): " + (oldest.lag ? oldest.lag() : lagReport(oldest.lastChunk)) +
        ". A rank is stuck, died, or did not issue the same collectives (or the matching "
        "send/recv) in the "
        "same order; destroy the communicator (lanesCommAbort) and recreate it.";
    lock.unlock();
    comm_.fail(lanesTimeout, message);  // runs the hook: poison()
    lock.lock();
  }
}

std::string StagedWatchdog::lagReport(uint32_t g) const {
  std::string lagging;
  const int n = channel_->layout().nranks;
  for (int r = 0; r < n; ++r) {
    const uint32_t ready = StageChannel::read(channel_->counter(StageFlag::Ready, r));
    const uint32_t reduced = StageChannel::read(channel_->counter(StageFlag::Reduced, r));
    const uint32_t consumed = StageChannel::read(channel_->counter(StageFlag::Consumed, r));
    if (static_cast<int32_t>(consumed - g) >= 0) continue;
    if (!lagging.empty()) lagging += "; ";
    lagging += "rank " + std::to_string(r) + " (ready " + std::to_string(ready) + ", reduced " +
               std::to_string(reduced) + ", consumed " + std::to_string(consumed) + ")";
  }
  if (lagging.empty()) return "every rank's counters reached chunk " + std::to_string(g);
  return "waiting for chunk " + std::to_string(g) + "; counters of the lagging ranks: " + lagging;
}

}  // namespace lanes
