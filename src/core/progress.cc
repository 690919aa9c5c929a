#include "core/progress.h"

#include <algorithm>
#include <cstring>

#include "lanes/lanes.h"

namespace lanes {
namespace {
constexpr size_t kReportBytes = 8 + 8 + 1 + kSignatureBytes + 4 + 4 + 4 + 4;
}

std::vector<uint8_t> ProgressReport::encode() const {
  std::vector<uint8_t> sig = encodeSignatures(0, {currentOp});
  std::vector<uint8_t> out(kReportBytes);
  uint8_t* p = out.data();
  std::memcpy(p, &lastCompleted, 8);
  std::memcpy(p + 8, &current, 8);
  p[16] = static_cast<uint8_t>(state);
  std::memcpy(p + 17, sig.data() + 12, kSignatureBytes);
  std::memcpy(p + 17 + kSignatureBytes, &currentOps, 4);
  std::memcpy(p + 21 + kSignatureBytes, &asyncError, 4);
  std::memcpy(p + 25 + kSignatureBytes, &rank, 4);
  std::memcpy(p + 29 + kSignatureBytes, &stateMs, 4);
  return out;
}

bool ProgressReport::decode(const std::vector<uint8_t>& bytes, ProgressReport* out) {
  if (bytes.size() != kReportBytes || bytes[16] > static_cast<uint8_t>(State::Failed)) return false;
  const uint8_t* p = bytes.data();
  ProgressReport r;
  std::memcpy(&r.lastCompleted, p, 8);
  std::memcpy(&r.current, p + 8, 8);
  r.state = static_cast<State>(p[16]);
  std::vector<uint8_t> sig = encodeSignatures(0, {OpSignature{}});
  std::memcpy(sig.data() + 12, p + 17, kSignatureBytes);
  std::vector<OpSignature> sigs;
  uint64_t first = 0;
  if (!decodeSignatures(sig, &first, &sigs).isOk()) return false;
  r.currentOp = sigs.at(0);
  std::memcpy(&r.currentOps, p + 17 + kSignatureBytes, 4);
  std::memcpy(&r.asyncError, p + 21 + kSignatureBytes, 4);
  std::memcpy(&r.rank, p + 25 + kSignatureBytes, 4);
  std::memcpy(&r.stateMs, p + 29 + kSignatureBytes, 4);
  *out = r;
  return true;
}

std::string ProgressReport::currentDescription() const {
  if (current < 0) return "";
  std::string s = describeSignature(currentOp);
  // "allreduce(count ...)" -> "allreduce #42 (count ...)"
  size_t paren = s.find('(');
  s = s.substr(0, paren) + " #" + std::to_string(current) + " " + s.substr(paren);
  if (currentOps > 1) s += " and " + std::to_string(currentOps - 1) + " more call(s) of its group";
  return s;
}

std::string ProgressReport::describe() const {
  std::string s = lastCompleted < 0 ? std::string("no operation completed yet")
                                    : "last completed #" + std::to_string(lastCompleted);
  switch (state) {
    case State::Idle:
      s += ", no operation running";
      break;
    case State::Running:
      s += ", now in " + currentDescription();
      break;
    case State::Failed:
      s += ", " + currentDescription() + " failed there";
      break;
  }
  if (asyncError != lanesSuccess)
    s += std::string(" (its communicator failed: ") +
         lanesGetErrorString(static_cast<lanesResult_t>(asyncError)) + ")";
  return s;
}

void ProgressTracker::begin(int64_t seq, const OpSignature& first, uint32_t ops) {
  std::lock_guard<std::mutex> lock(mutex_);
  state_.current = seq;
  state_.currentOp = first;
  state_.currentOps = ops;
  state_.state = ProgressReport::State::Running;
  since_ = run_.began = Clock::now();
  run_.ended = {};
}

void ProgressTracker::end(int64_t seq, bool completed) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (completed) {
    state_.lastCompleted = seq;
    state_.state = ProgressReport::State::Idle;
  } else {
    state_.state = ProgressReport::State::Failed;
  }
  since_ = run_.ended = Clock::now();
}

ProgressReport ProgressTracker::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  ProgressReport r = state_;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since_).count();
  r.stateMs = static_cast<uint32_t>(std::min<int64_t>(ms, UINT32_MAX));
  return r;
}

ProgressTracker::Run ProgressTracker::lastRun() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return run_;
}

}  // namespace lanes
