// What the flight recorder and the metrics see of each operation: one entry
// per communicator of a batch, opened before its plan is chosen (so the plan
// lands on it) and closed when the batch finished (host buffers) or was
// enqueued (device buffers).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "algorithms/schedule.h"
#include "base/status.h"
#include "exec/request.h"
#include "observe/flight_recorder.h"

struct lanesComm;

namespace lanes {

// Each ObservedOp pushes the call's NVTX range where a tool is attached, once
// its plan is chosen (planned); its end (hostEnded, deviceEnqueued) pops it
// on the same thread.
class ObservedOp {
 public:
  // Opens `comm`'s part of `requests` (the calls whose comm it is).
  ObservedOp(lanesComm* comm, std::span<const Request> requests);
  lanesComm* comm() const { return comm_; }
  void setSeq(int64_t seq) const;
  // Every plan of the batch is noted: the call's NVTX range is pushed, named
  // after the call and its plan (as the flight recorder holds it).
  void planned() const;
  // Host buffers: the engine starts moving bytes.
  void started() const;
  // Host buffers: the batch ended with `status`; `waitingFor`: the peers it
  // still waited for, where it failed so.
  void hostEnded(std::span<const Request> requests, const Status& status,
                 std::span<const int> waitingFor) const;
  // Device buffers: enqueued on `stream` (or failed to, with `status`).
  void deviceEnqueued(std::span<const Request> requests, cudaStream_t stream,
                      const Status& status) const;
  // The bytes `schedule` moved to and from peers, by transport, and the time
  // the engine waited for peers (metrics; nothing when they are off).
  void countTraffic(const Schedule& schedule) const;
  void countPeerWait(uint64_t ns) const;

 private:
  void countCalls(std::span<const Request> requests, bool onDevice) const;
  void popRange() const;
  void trace() const;  // its stages into the trace file (LANES_TRACE_FILE)
  FlightCall call_;
  uint32_t calls_ = 0;
  uint64_t bytes_ = 0;
  mutable bool rangePushed_ = false;  // the call's NVTX range (observe/nvtx_ranges.h)
  lanesComm* comm_;
  uint64_t id_ = 0;
  int64_t beganNs_ = 0;  // steady clock, for the latency metrics
};

// A batch refused before it ran (LANES_CHECK_MISMATCH): one failed entry
// per communicator, so the dump shows the call that never started.
void observeRefusedBatch(std::span<const Request> requests, const Status& status);

}  // namespace lanes
