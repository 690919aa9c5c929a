#include "observe/flight_recorder.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

namespace lanes {
namespace {
constexpr const char* kStateNames[] = {"running", "enqueued", "captured", "completed", "failed"};
}

const char* flightStateName(FlightState s) { return kStateNames[static_cast<size_t>(s)]; }

bool parseFlightState(std::string_view name, FlightState* out) {
  for (size_t i = 0; i < std::size(kStateNames); ++i)
    if (name == kStateNames[i]) {
      *out = static_cast<FlightState>(i);
      return true;
    }
  return false;
}

int64_t flightNowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

FlightRecorder::FlightRecorder(size_t capacity) : ring_(capacity) {}

const FlightEntry* FlightRecorder::find(uint64_t id) const {
  if (ring_.empty()) return nullptr;
  const FlightEntry& e = ring_[id % ring_.size()];
  return id < next_ && e.id == id ? &e : nullptr;
}

FlightEntry* FlightRecorder::find(uint64_t id) {
  return const_cast<FlightEntry*>(std::as_const(*this).find(id));
}

uint64_t FlightRecorder::begin(const FlightCall& call, uint32_t calls, uint64_t bytes,
                               bool onDevice) {
  if (ring_.empty()) return 0;
  const int64_t now = flightNowUs();
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t id = next_++;
  FlightEntry& e = ring_[id % ring_.size()];
  e = FlightEntry{};
  e.id = id;
  e.call = call;
  e.calls = calls;
  e.bytes = bytes;
  e.onDevice = onDevice;
  e.state = onDevice ? FlightState::Enqueued : FlightState::Running;
  e.issuedUs = now;
  return id;
}

void FlightRecorder::setSeq(uint64_t id, int64_t seq) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (FlightEntry* e = find(id)) e->seq = seq;
}

void FlightRecorder::notePlan(std::string_view plan) {
  if (ring_.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (next_ == 0) return;
  FlightEntry& e = ring_[(next_ - 1) % ring_.size()];
  const size_t used = std::strlen(e.plan.data());
  // A group of several calls on one plan says it once.
  for (std::string_view rest(e.plan.data(), used); !rest.empty();) {
    const size_t cut = rest.find('+');
    if (rest.substr(0, cut) == plan) return;
    rest = cut == std::string_view::npos ? std::string_view() : rest.substr(cut + 1);
  }
  size_t at = used;
  if (used > 0 && at + 1 < e.plan.size()) e.plan[at++] = '+';
  const size_t n = std::min(plan.size(), e.plan.size() - 1 - at);
  std::memcpy(e.plan.data() + at, plan.data(), n);
  e.plan[at + n] = '\0';
}

void FlightRecorder::started(uint64_t id) {
  if (ring_.empty()) return;
  const int64_t now = flightNowUs();
  std::lock_guard<std::mutex> lock(mutex_);
  if (FlightEntry* e = find(id)) e->startedUs = now;
}

void FlightRecorder::finished(uint64_t id, bool ok, std::span<const int> waitingFor) {
  if (ring_.empty()) return;
  const int64_t now = flightNowUs();
  std::lock_guard<std::mutex> lock(mutex_);
  FlightEntry* e = find(id);
  if (e == nullptr) return;
  e->state = ok ? FlightState::Completed : FlightState::Failed;
  e->endedUs = now;
  e->waitingCount = static_cast<uint8_t>(std::min(waitingFor.size(), e->waitingFor.size()));
  std::copy_n(waitingFor.begin(), e->waitingCount, e->waitingFor.begin());
}

void FlightRecorder::enqueued(uint64_t id, int32_t marker, bool captured, uint64_t stream) {
  if (ring_.empty()) return;
  const int64_t now = flightNowUs();
  std::lock_guard<std::mutex> lock(mutex_);
  FlightEntry* e = find(id);
  if (e == nullptr) return;
  e->startedUs = now;
  e->state = captured ? FlightState::Captured : FlightState::Enqueued;
  e->stream = stream;
  if (marker < 0 || captured) return;
  e->marker = marker;
  if (markerOwner_.size() <= static_cast<size_t>(marker)) markerOwner_.resize(marker + 1, 0);
  markerOwner_[marker] = id + 1;
}

void FlightRecorder::settleMarkers(const std::function<bool(int32_t)>& done) {
  const int64_t now = flightNowUs();
  std::lock_guard<std::mutex> lock(mutex_);
  // Only the entry that holds a marker now may read it.
  for (size_t marker = 0; marker < markerOwner_.size(); ++marker) {
    if (markerOwner_[marker] == 0) continue;
    FlightEntry* held = find(markerOwner_[marker] - 1);
    if (held == nullptr || held->state != FlightState::Enqueued) continue;
    FlightEntry& e = *held;
    if (done(static_cast<int32_t>(marker))) {
      e.state = FlightState::Completed;
      e.endedUs = now;
    }
  }
  // A stream runs its work in order: what went on before a completed entry
  // on its stream has completed too (entries whose marker was taken again).
  const uint64_t held = std::min<uint64_t>(next_, ring_.size());
  std::vector<std::pair<uint64_t, uint64_t>> passed;  // (stream, newest completed id)
  for (uint64_t id = next_; id-- > next_ - held;) {
    const FlightEntry& e = ring_[id % ring_.size()];
    if (!e.onDevice || e.stream == 0 || e.state != FlightState::Completed) continue;
    if (std::none_of(passed.begin(), passed.end(),
                     [&](const auto& p) { return p.first == e.stream; }))
      passed.emplace_back(e.stream, id);
  }
  for (uint64_t id = next_ - held; id < next_; ++id) {
    FlightEntry& e = ring_[id % ring_.size()];
    if (e.state != FlightState::Enqueued) continue;
    for (const auto& [stream, newest] : passed)
      if (e.stream == stream && id < newest) {
        e.state = FlightState::Completed;
        e.endedUs = now;
      }
  }
}

std::optional<FlightEntry> FlightRecorder::entry(uint64_t id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const FlightEntry* e = find(id);
  return e != nullptr ? std::optional<FlightEntry>(*e) : std::nullopt;
}

std::vector<FlightEntry> FlightRecorder::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<FlightEntry> out;
  const uint64_t held = std::min<uint64_t>(next_, ring_.size());
  out.reserve(held);
  for (uint64_t id = next_ - held; id < next_; ++id) out.push_back(ring_[id % ring_.size()]);
  return out;
}

uint64_t FlightRecorder::issued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return next_;
}

}  // namespace lanes
