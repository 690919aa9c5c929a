// What a device path sees of its communicator: who this rank is, how to meet
// the other ranks, how long to wait, where a failure goes, and the slots its
// paths live in. The core defines it (core/comm_view.cc); the paths never see
// lanesComm's members, so they depend on this narrow view, not on the core.
#pragma once

#include <sched.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/status.h"
#include "exec/call_facts.h"
#include "lanes/lanes.h"

struct lanesComm;

namespace lanes {

class Bootstrap;
class DeviceContext;
class WorkMarkers;
struct CommConfig;
struct Request;

// A communicator's device paths, made at init. The members go in reverse
// order: the shared context, LL and staged paths before the proxy (which
// releaseComm stops first anyway, as it drives the connections).
struct DevicePaths {
  std::mutex mutex;  // guards the slots, not the paths' work
  // The flight recorder's completion markers; null where it is off. First:
  // destroyed last, after the paths whose threads may still dump.
  std::unique_ptr<WorkMarkers> markers;
  std::unique_ptr<DeviceContext> proxy;
  std::unique_ptr<DeviceContext> staged;
  std::unique_ptr<DeviceContext> ll;
  std::unique_ptr<DeviceContext> sharedContext;
  // The rank set and the paths as set up, fixed once init made them: what
  // every call's facts start from (no per-call walk over the ranks).
  bool settled = false;
  CallFacts settledFacts;
  ~DevicePaths();
};

// Called with the failure's message when the communicator fails, under its
// failure lock: short, and never calls back into the view's failure side.
using FailureHook = std::function<void(const std::string& message)>;

class CommView {
 public:
  explicit CommView(lanesComm* comm) : comm_(comm) {}

  int rank() const;
  int nranks() const;
  int cudaDev() const;
  // Ranks of this communicator that are threads of this process.
  int processRanks() const;
  Bootstrap& bootstrap() const;
  bool hasBootstrap() const;
  uint64_t commId() const;
  double timeoutSeconds() const;
  Deadline deadline() const { return Deadline::after(timeoutSeconds()); }
  // "rank 2 of 4 (name)"
  std::string describe() const;
  // Every rank's NUMA node (-1 unknown), by rank.
  std::vector<int> rankNumaNodes() const;
  DevicePaths& paths() const;
  // LANES_PROTO, LANES_ALGO and the sizes the choice reads, read at init.
  const SelectionConfig& selection() const;
  // Every knob of the communicator, read at init (exec/comm_config.h).
  const CommConfig& config() const;
  // Records where one call ran ("allreduce", "staged"): the PLAN log and the
  // perf tools read it.
  void notePlan(const std::string& call, const std::string& plan, uint64_t bytes) const;
  // Facts of the rank set, the same on every rank (core/comm_topology.h).
  bool processesTimeSliceGpu() const;
  int ranksPerGpu() const;
  bool allOnOneHost() const;
  // Why the topology keeps this host's GPUs off P2P, "" where it does not
  // (planner/p2p_rule.h; decided at init).
  const std::string& p2pRefusal() const;
  // The CPUs near this rank's GPU the process may use (core/comm_topology.h).
  bool gpuLocalCpus(cpu_set_t* out) const;
  bool someProcessHoldsSeveralRanks() const;
  bool threadsBesideProcesses() const;
  std::vector<int> ranksSharingMyContext() const;

  // The failure sink. fail() records the first failure (and runs the hooks);
  // checkAbort() says what a waiting op should return now, or OK.
  void fail(lanesResult_t code, const std::string& message) const;
  Status checkAbort() const;
  bool failed() const;
  // Set by lanesCommAbort: waits poll it.
  const std::atomic<bool>& abortFlag() const;
  // Registers `hook`; when the communicator has failed already, runs it now.
  // Returns the hook's slot for removeFailureHook.
  size_t addFailureHook(FailureHook hook) const;
  void removeFailureHook(size_t slot) const;

  // Runs host-buffer requests on the host engine (the proxy's engine),
  // holding the engine while they run.
  Status runOnHost(std::vector<Request>& requests) const;

  lanesComm* handle() const { return comm_; }

 private:
  lanesComm* comm_;
};

}  // namespace lanes
