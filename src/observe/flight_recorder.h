// The flight recorder: the last N operations of one communicator on this
// rank, kept in a ring so that a hung or failed job can say which call each
// rank was in, how far it got and whom it waited for (core/flight_dump.h
// writes it out; lanes-flight reads every rank's dump).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lanes {

// What was called, as every rank can compare it. The strings are static
// names ("allreduce", "float32", "sum"), so recording allocates nothing.
struct FlightCall {
  const char* name = "";      // "allreduce", "send", "recv"
  const char* datatype = "";  // "float32"
  const char* redop = "";     // "" where the call has no op
  int32_t root = -1;          // root of a rooted collective, peer of a send/recv; -1: none
  uint64_t count = 0;         // elements as the API counts them
};

enum class FlightState : uint8_t {
  Running,    // host buffers: in the host engine
  Enqueued,   // device buffers: on the stream, not seen finished yet
  Captured,   // device buffers: into a CUDA Graph, which runs it later
  Completed,  // finished (device: the stream passed it)
  Failed,
};
const char* flightStateName(FlightState s);
// The name flightStateName gives, back; false for anything else.
bool parseFlightState(std::string_view name, FlightState* out);

inline constexpr size_t kFlightPlanChars = 40;
inline constexpr size_t kFlightWaitingPeers = 8;

struct FlightEntry {
  uint64_t id = 0;     // operation number on this communicator: every group or call, in issue order
  int64_t seq = -1;    // the host engine's number ("allreduce #42" in errors); -1: none
  FlightCall call;     // the first call of the group
  uint32_t calls = 1;  // calls in the group
  uint64_t bytes = 0;  // bytes this rank's calls read from their send buffers
  bool onDevice = false;
  FlightState state = FlightState::Running;
  std::array<char, kFlightPlanChars> plan{};  // "ring", "staged", "ring+p2p"; NUL-terminated
  int64_t issuedUs = 0;                       // wall clock, microseconds since the epoch
  int64_t startedUs =
      0;  // device: enqueued; host: the engine began (recorded under a trace); 0: not yet
  int64_t endedUs = 0;  // completed or failed (device: when a dump first saw it done); 0: not yet
  // Peers a failed host call still waited for (the first kFlightWaitingPeers).
  std::array<int32_t, kFlightWaitingPeers> waitingFor{};
  uint8_t waitingCount = 0;
  int32_t marker = -1;  // device: the completion marker the device path recorded; -1: none
  uint64_t stream = 0;  // device: the stream it went on, as a number (not dumped)
};

// Microseconds since the epoch, the recorder's clock.
int64_t flightNowUs();

// Thread-safe; every update is one uncontended lock and no allocation.
class FlightRecorder {
 public:
  // capacity 0: recording is off and every call below does nothing.
  explicit FlightRecorder(size_t capacity = 0);
  bool on() const { return !ring_.empty(); }
  size_t capacity() const { return ring_.size(); }

  // Opens an entry (Running, or Enqueued for device buffers) and returns its id.
  uint64_t begin(const FlightCall& call, uint32_t calls, uint64_t bytes, bool onDevice);
  void setSeq(uint64_t id, int64_t seq);
  // Adds `plan` to the newest entry's ("ring", then "ring+p2p"); the newest
  // is the one the calling thread opened, as calls on one communicator are
  // issued by one thread at a time.
  void notePlan(std::string_view plan);
  void started(uint64_t id);
  void finished(uint64_t id, bool ok, std::span<const int> waitingFor = {});
  // Device buffers: enqueued on `stream` with completion `marker` (-1:
  // none), or captured. A device path reuses its markers in turn: an entry
  // whose marker was taken again is settled by stream order instead.
  void enqueued(uint64_t id, int32_t marker, bool captured, uint64_t stream);
  // Marks enqueued entries whose marker `done` says has passed as completed,
  // and with each, the older entries of its stream. `done` runs under the
  // recorder's lock: it must not record.
  void settleMarkers(const std::function<bool(int32_t marker)>& done);
  // Entry `id`, if it is still held.
  std::optional<FlightEntry> entry(uint64_t id) const;
  // The entries held, oldest first.
  std::vector<FlightEntry> snapshot() const;
  // Operations begun so far (ids 0..issued-1; the oldest are overwritten).
  uint64_t issued() const;

 private:
  FlightEntry* find(uint64_t id);  // caller holds mutex_; null once overwritten
  const FlightEntry* find(uint64_t id) const;
  mutable std::mutex mutex_;
  std::vector<FlightEntry> ring_;
  uint64_t next_ = 0;
  std::vector<uint64_t> markerOwner_;  // by marker: id + 1 of the entry holding it, 0: none
};

}  // namespace lanes
