// Host executor: runs Schedules on host memory by polling transport ports.
// One thread drives every op of every schedule handed to it — of one
// communicator or of several (a group spanning communicators) — so grouped
// operations progress together and a ring never deadlocks on full slots.
// Each wait is bounded by the deadline and broken by the abort checks.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "algorithms/schedule.h"
#include "base/deadline.h"
#include "base/status.h"
#include "transport/shm/sum_arena.h"
#include "transport/transport.h"

namespace lanes {

// Connections by peer rank (nullptr for self and for unconnected peers).
using ConnectionTable = std::vector<Connection*>;

// One schedule to run: on which lane, over which connections, for whom.
// Work items sharing (connections, lane) run one after the other in the order
// given; all others run concurrently.
struct ExecWork {
  Schedule* schedule = nullptr;
  int lane = 0;
  const ConnectionTable* connections = nullptr;
  // The communicator's host-summation arena, for a schedule with Arena* ops.
  SumArena* arena = nullptr;
  int rank = 0;
  // Polled while waiting: a non-OK status stops the run (abort, dead peer).
  std::function<Status()> checkAbort;
  // Polled while an Arena* op waits for a peer's counter: a non-OK status
  // (the peer left or died) stops the run, naming it. Null: not polled.
  std::function<Status(int peer)> peerStatus;
  // Names the operation in errors, e.g. "allreduce #42".
  std::string label;
  // Busy-wait budget before yielding (see Backoff).
  unsigned spinLimit = 64;
};

// On a timeout, *waitingFor (when given) lists the peers the stuck
// operation still waited on, for the hang diagnosis (core/watchdog.h).
// *waitedNs (when given) adds the time nothing could move: waits for peers.
Status runWork(std::span<ExecWork> work, Deadline deadline, std::vector<int>* waitingFor = nullptr,
               uint64_t* waitedNs = nullptr);

// Convenience for a single communicator.
struct LaneSchedule {
  Schedule* schedule = nullptr;
  int lane = 0;
};
struct ExecContext {
  int rank = 0;
  Deadline deadline = Deadline::never();
  std::function<Status()> checkAbort;
  std::string opLabel;
};
Status runSchedules(std::span<const LaneSchedule> schedules, const ConnectionTable& connections,
                    const ExecContext& ctx);

}  // namespace lanes
