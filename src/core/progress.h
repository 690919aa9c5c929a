// Progress of one communicator on this rank: which operation runs, which
// completed last. The executor's caller updates it around every run; the
// bootstrap monitor thread reads it to answer a peer's progress query, so a
// rank diagnosing a hang learns what every other rank is doing.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/op_signature.h"

namespace lanes {

// What one rank reports about itself. Operations are numbered as in errors
// ("allreduce #42"): a communicator's groups and calls, from 0.
struct ProgressReport {
  enum class State : uint8_t { Idle, Running, Failed };
  int64_t lastCompleted = -1;  // -1: none yet
  int64_t current = -1;        // the operation running, or the one that failed last
  State state = State::Idle;
  OpSignature currentOp;    // its first call
  uint32_t currentOps = 0;  // calls in its group
  int32_t asyncError = 0;   // the communicator's lanesResult_t failure, 0 if healthy
  int32_t rank = -1;
  // How long `state` has lasted (ms): tells a rank that never called an
  // operation (idle since before the asker began it) from one about to.
  uint32_t stateMs = 0;

  std::vector<uint8_t> encode() const;
  static bool decode(const std::vector<uint8_t>& bytes, ProgressReport* out);
  // "allreduce #42 (count 1024 float32 sum)"; "" when nothing ran.
  std::string currentDescription() const;
  // "last completed #41; running allreduce #42 (count ...)".
  std::string describe() const;
  bool runs(int64_t seq, const OpSignature& op) const {
    return state == State::Running && current == seq && currentOp == op;
  }
};

// Cheap to update (one uncontended lock per change); safe to read from any thread.
class ProgressTracker {
 public:
  using Clock = std::chrono::steady_clock;
  void begin(int64_t seq, const OpSignature& first, uint32_t ops);
  void end(int64_t seq, bool completed);
  ProgressReport snapshot() const;
  // When the operation running (or the last one) began and, once over, ended.
  struct Run {
    Clock::time_point began, ended;
  };
  Run lastRun() const;

 private:
  mutable std::mutex mutex_;
  ProgressReport state_;
  Clock::time_point since_ = Clock::now();  // when state_.state last changed
  Run run_;
};

// Hang-diagnosis state of a communicator (lanesComm::watch).
struct CommWatch {
  ProgressTracker progress;
  bool checkMismatch = false;       // LANES_CHECK_MISMATCH, read at init
  uint64_t collectivesChecked = 0;  // numbers collectives for the mismatch check
};

}  // namespace lanes
