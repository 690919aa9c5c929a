// The communicator behind the public lanesComm_t handle.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/scratch_pool.h"
#include "base/datatype.h"
#include "base/status.h"
#include "bootstrap/bootstrap.h"
#include "core/comm_topology.h"
#include "core/progress.h"
#include "core/registration.h"
#include "exec/comm_config.h"
#include "exec/comm_view.h"
#include "exec/device_path.h"
#include "exec/host_executor.h"
#include "observe/flight_recorder.h"
#include "observe/metrics.h"
#include "observe/trace_writer.h"
#include "planner/plan_cache.h"
#include "transport/shm/sum_arena.h"
#include "transport/transport.h"

namespace lanes {

struct CommOptions {
  bool blocking = true;
  double timeoutSeconds = 300;
  std::string name;
  std::optional<WireFormat> wire;  // lanesConfig_t.wireFormat; unset: LANES_WIRE
  bool hostOnly = false;           // no GPU for this rank, even where CUDA sees one
  bool quietLog = false;           // INFO and TRACE of its creation muted (the probe's ranks)
  // Settings in place of LANES_* variables for this communicator alone (the
  // machine probes' forced algorithms), applied after the environment is read.
  std::function<void(CommConfig&)> adjustConfig;
};

// Lane 0 carries point-to-point traffic; collectives use lanes 1..n-1, so the
// relative order of sends/recvs and collectives inside a group never matters.
inline constexpr int kP2pLane = 0;

// Creation that runs in the background (a non-blocking config, or an init
// inside a group): lanesInProgress until it ends, then lanesSuccess or the
// error it ended with (core/init.h).
struct CommInit {
  std::atomic<int> state{lanesSuccess};
  std::thread thread;
  std::mutex mutex;
  std::condition_variable done;
  Status status;  // under mutex
  // Aborted while the init ran: the init thread frees the communicator when
  // its own waits end (under mutex).
  bool abandoned = false;
};

// The connections to every peer. The mutex is held while they are filled
// (init), closed by a failure (any thread: the bootstrap monitor, a
// watchdog) or cleared (release): a failure noticed while the communicator
// is being destroyed must not close unmapped rings.
struct CommLinks {
  std::mutex mutex;
  std::vector<std::unique_ptr<Connection>> connections;  // by peer
  ConnectionTable table;                                 // raw view for the executor
};

// Failure state, written by the bootstrap monitor thread, a watchdog, abort
// or revoke.
struct CommFailure {
  // lanesCommRevoke ran: operations fail; destroy, abort, split and shrink remain.
  std::atomic<bool> revoked{false};
  std::atomic<bool> aborted{false};
  std::atomic<bool> abortSpread{false};  // the peers were told of this rank's abort
  std::atomic<int> asyncError{lanesSuccess};
  std::mutex mutex;
  std::string message;
  int deadRank = -1;  // the rank whose death caused the failure, when known
  std::string cause;  // what was seen of that rank, to pass on to others
  // Run once by fail(), under mutex, right after the failure is recorded:
  // device paths release GPU streams parked on flags. Hooks must be short and
  // must not call checkAbort(); an empty entry is skipped (a path clears its
  // entry, under mutex, when it goes away).
  std::vector<FailureHook> hooks;
};

}  // namespace lanes

struct lanesComm {
  static constexpr uint64_t kMagic = 0x4c414e4553434f4dull;  // "LANESCOM"
  uint64_t magic = kMagic;
  // Schedules' scratch, kept for the next call; first, so that it goes last,
  // after everything that may still hold a loan.
  lanes::ScratchPool scratchPool;

  // Identity: who this rank is among whom, and how long it waits.
  int rank = -1;
  int nranks = 0;
  int cudaDev = -1;
  lanes::CommOptions options;
  // Hang diagnosis (core/watchdog.h); before `bootstrap`, whose monitor thread reads it.
  lanes::CommWatch watch;
  // The last operations (core/flight_dump.h), made with the communicator;
  // capacity 0 where LANES_FLIGHT_RECORDER=0.
  std::unique_ptr<lanes::FlightRecorder> flight = std::make_unique<lanes::FlightRecorder>();
  // Set once init attached the observers (core/observers.h): dumps wait for
  // it, so none reads a communicator still being set up.
  std::atomic<bool> observed{false};
  // This rank's metrics (observe/metrics.h); null unless LANES_METRICS is set.
  std::shared_ptr<lanes::CommMetrics> metrics;
  // Trace events of every call (observe/trace_writer.h); null unless LANES_TRACE_FILE is set.
  std::unique_ptr<lanes::TraceWriter> trace;
  std::mutex flightDumpMutex;  // one dump of this communicator at a time (one temporary file)
  std::unique_ptr<lanes::Bootstrap> bootstrap;
  // Made through the bootstrap, closed before it.
  lanes::CommLinks links;
  int localRanks = 1;       // ranks of this communicator on this host
  int processRanks = 1;     // ranks of this communicator in this process (threads)
  unsigned spinLimit = 64;  // see Backoff
  uint64_t seq = 0;         // collectives and groups issued so far
  // Every knob (LANES_NLANES, LANES_PROTO, the transports' and paths' sizes),
  // read once when the communicator is made.
  lanes::CommConfig config;
  // Where the last call ran, for the PLAN log and the perf tools.
  std::mutex planMutex;
  std::string lastPlanCall, lastPlan;    // "allreduce", "staged"
  std::set<std::string> explainedPlans;  // "what, size class" the PLAN log explained
  lanes::HostPlanCache hostPlans;        // the host choice per collective and size class
  lanes::DevicePlanCache devicePlans;    // the device paths' order per kind of batch and size class
  // Every rank's GPU, host and NUMA placement, exchanged at init (planner input).
  std::vector<lanes::RankPlacement> placement;
  std::string p2pRefusal;  // why the topology keeps this host's GPUs off P2P (planner/p2p_rule.h)
  // The order the host ring visits the ranks in (algorithms/ring_order.h),
  // from `placement`, the same on every rank; empty: 0, 1, ..., n-1.
  std::vector<int> ringOrder;
  // Each rank's host, numbered by first appearance (the hierarchical plans).
  std::vector<int> hostOf;
  // Each rank's CPU package (of its host), numbered by first appearance: the
  // hierarchical plans' groups where every rank is on one host.
  std::vector<int> packageOf;
  // Host summation of host buffers (exec/arena_sum.h): made at the first call
  // that takes it; null before, or where it could not be made.
  std::unique_ptr<lanes::SumArena> sumArena;
  uint64_t shrinkSeq = 0;  // lanesCommShrink calls on this communicator, in order
  // Held while the host engine drives this communicator's connections (the
  // caller's thread for host buffers, the device proxy for device buffers).
  std::mutex engineMutex;

  // Pre-multiplied-sum ops created on this communicator (index = op - lanesNumOps).
  std::mutex opsMutex;
  std::vector<lanes::RedOp> userOps;
  std::vector<bool> userOpLive;

  lanes::CommInit init;

  // Buffers and windows registered on this communicator (core/registration.h).
  std::mutex registrationsMutex;
  std::vector<std::unique_ptr<lanes::Registration>> registrations;

  lanes::CommFailure failure;

  std::mutex errorMutex;
  std::string lastError;

  // The device paths (exec/comm_view.h). Last member: destroyed first, while
  // the failure state their hooks and waits use lives.
  lanes::DevicePaths devicePaths;

  // Records the first fatal failure and wakes every port.
  void fail(lanesResult_t code, const std::string& message, int deadRank = -1,
            const std::string& cause = "");
  // The failure hooks (caller holds failure.mutex): device streams parked on
  // flags are released.
  void runFailureHooksLocked();
  // Closes every connection, so a wait that polls its port returns at once.
  void closeConnections();
  // What a waiting op should return now, or OK.
  lanes::Status checkAbort();
  std::string describe() const;  // "rank 2 of 4 (comm name)"
  std::string idText() const;    // "0x..." (the bootstrap's id: the same on every rank)
};
