// Finalize, destroy, abort and the queries on a communicator.
#include <memory>
#include <vector>

#include "base/log.h"
#include "core/comm.h"
#include "core/comm_registry.h"
#include "core/errors.h"
#include "core/flight_dump.h"
#include "core/init.h"
#include "transport/transport.h"

using namespace lanes;

// Tells the peers, once, that this rank aborts: the root cause when there is
// one, so every survivor names the rank that died rather than the one that
// gave up because of it.
void lanes::spreadAbort(lanesComm* comm) {
  if (!comm->bootstrap || comm->failure.abortSpread.exchange(true)) return;
  std::lock_guard<std::mutex> lock(comm->failure.mutex);
  if (comm->failure.deadRank >= 0 && comm->failure.deadRank != comm->rank)
    comm->bootstrap->spreadFailure(comm->failure.deadRank, comm->failure.cause);
  else
    comm->bootstrap->spreadFailure(comm->rank, "rank " + std::to_string(comm->rank) +
                                                   " aborted its communicator (lanesCommAbort)");
}

void lanes::releaseOrAbandon(lanesComm* comm, bool graceful) {
  {
    // The init thread may still wait on the bootstrap: it frees the
    // communicator when that ends, so the caller returns now.
    std::lock_guard<std::mutex> lock(comm->init.mutex);
    if (comm->init.state.load() == lanesInProgress) {
      comm->init.abandoned = true;
      comm->init.thread.detach();
      return;
    }
  }
  if (comm->failure.aborted.load())
    spreadAbort(comm);  // the init may have ended after the abort looked
  releaseComm(comm, graceful);
}

namespace {

// Waits once for every peer's tail, not once per peer: the connections are
// drained in turn in 1 ms slices until all are done or the deadline passed,
// so one whose peer stopped reading does not use up the others' time (a
// verbs connection moves only while it is polled).
void drainAll(const std::vector<std::unique_ptr<Connection>>& connections) {
  const Deadline deadline = Deadline::after(kConnectionDrainSeconds);
  std::vector<Connection*> left;
  for (const auto& c : connections)
    if (c) left.push_back(c.get());
  while (!left.empty()) {
    const bool last = deadline.expired();
    std::erase_if(left, [](Connection* c) { return c->drain(Deadline::after(0.001)); });
    if (last) break;
  }
}

}  // namespace

// Frees a retired communicator: stops the monitor, closes every connection.
void lanes::releaseComm(lanesComm* comm, bool graceful) {
  std::unique_ptr<lanesComm> owned(comm);
  // The init ended (releaseOrAbandon, or the abandoned init thread itself).
  if (owned->init.thread.joinable()) owned->init.thread.join();
  // The device proxy drives the connections: stop it first.
  owned->devicePaths.proxy.reset();
  {
    std::lock_guard<std::mutex> lock(owned->links.mutex);
    if (graceful) {
      drainAll(owned->links.connections);
    } else {
      for (auto& c : owned->links.connections)
        if (c) c->close();
    }
    owned->links.connections.clear();
  }
  if (owned->bootstrap) owned->bootstrap->shutdown();
  if (owned->metrics) MetricsRegistry::process().retire(owned->metrics.get());
  owned->magic = 0;
}

extern "C" {

lanesResult_t lanesCommFinalize(lanesComm_t comm) {
  CommRef ref(comm);
  if (!ref) return report(nullptr, notLive("lanesCommFinalize"));
  if (Status st = awaitInit(comm); !st) return report(comm, st);
  // Host-memory operations complete before their call returns, so nothing is
  // pending here; a failed communicator reports its failure.
  Status status = comm->checkAbort();
  return report(comm, status);
}

lanesResult_t lanesCommDestroy(lanesComm_t comm) {
  if (comm == nullptr) return lanesSuccess;  // as NCCL, and as free(NULL)
  bool healthy = false;
  {
    // Read the state under a reference, so a concurrent destroy cannot free it meanwhile.
    CommRef ref(comm);
    if (!ref) return report(nullptr, notLive("lanesCommDestroy"));
    healthy = awaitInit(comm).isOk() && comm->failure.asyncError.load() == lanesSuccess &&
              !comm->failure.aborted.load() && !comm->failure.revoked.load();
  }
  if (!retireComm(comm)) return report(nullptr, notLive("lanesCommDestroy"));
  LANES_INFO(Init, comm->rank, "comm %p destroyed", static_cast<void*>(comm));
  releaseOrAbandon(comm, healthy);
  return lanesSuccess;
}

lanesResult_t lanesCommAbort(lanesComm_t comm) {
  if (comm == nullptr) return lanesSuccess;  // as NCCL
  {
    CommRef ref(comm);
    if (!ref) return report(nullptr, notLive("lanesCommAbort"));
    // What was in flight or failed when the user gave up on it (a clean
    // shutdown that aborts an idle communicator writes nothing).
    if (comm->init.state.load() == lanesSuccess && flightHasUnfinished(comm))
      (void)dumpFlightRecord(comm, "abort");
    comm->failure.aborted.store(true);
    {
      std::lock_guard<std::mutex> lock(comm->init.mutex);
      comm->init.done.notify_all();  // calls waiting for the init return now
    }
    // A bootstrap still being made by the init thread is spread on by it.
    if (comm->init.state.load() != lanesInProgress) spreadAbort(comm);
    comm->closeConnections();
  }
  // Calls blocked in this communicator see the abort and return; then free it.
  if (!retireComm(comm)) return lanesSuccess;  // another thread won the race
  releaseOrAbandon(comm, false);
  return lanesSuccess;
}

lanesResult_t lanesCommGetAsyncError(lanesComm_t comm, lanesResult_t* asyncError) {
  CommRef ref(comm);
  if (!ref) return report(nullptr, notLive("lanesCommGetAsyncError"));
  if (asyncError == nullptr) return report(comm, invalidArgument("asyncError is NULL"));
  // Creation in the background first (lanesInProgress until it ends), then
  // failures of the work.
  int init = comm->init.state.load();
  *asyncError =
      static_cast<lanesResult_t>(init != lanesSuccess ? init : comm->failure.asyncError.load());
  return lanesSuccess;
}

lanesResult_t lanesCommCount(const lanesComm_t comm, int* count) {
  CommRef ref(comm);
  if (!ref) return report(nullptr, notLive("lanesCommCount"));
  if (count == nullptr) return report(comm, invalidArgument("count is NULL"));
  *count = comm->nranks;
  return lanesSuccess;
}

lanesResult_t lanesCommCuDevice(const lanesComm_t comm, int* device) {
  CommRef ref(comm);
  if (!ref) return report(nullptr, notLive("lanesCommCuDevice"));
  if (device == nullptr) return report(comm, invalidArgument("device is NULL"));
  *device = comm->cudaDev;
  return lanesSuccess;
}

lanesResult_t lanesCommUserRank(const lanesComm_t comm, int* rank) {
  CommRef ref(comm);
  if (!ref) return report(nullptr, notLive("lanesCommUserRank"));
  if (rank == nullptr) return report(comm, invalidArgument("rank is NULL"));
  *rank = comm->rank;
  return lanesSuccess;
}

const char* lanesGetErrorString(lanesResult_t result) {
  // "run with LANES_DEBUG=X for details" only where level X is off: otherwise
  // the details are in the log already (report() logs each error at WARN).
  const bool warnOn = logLevelOn(LogLevel::Warn);
  const bool infoOn = logLevelOn(LogLevel::Info);
  switch (result) {
    case lanesSuccess:
      return "no error";
    case lanesUnhandledCudaError:
      return infoOn ? "unhandled cuda error"
                    : "unhandled cuda error (run with LANES_DEBUG=INFO for details)";
    case lanesSystemError:
      return infoOn ? "unhandled system error"
                    : "unhandled system error (run with LANES_DEBUG=INFO for details)";
    case lanesInternalError:
      return "internal error - please report this issue to the Lanes developers";
    case lanesInvalidArgument:
      return warnOn ? "invalid argument"
                    : "invalid argument (run with LANES_DEBUG=WARN for details)";
    case lanesInvalidUsage:
      return warnOn ? "invalid usage" : "invalid usage (run with LANES_DEBUG=WARN for details)";
    case lanesRemoteError:
      return "remote process exited or there was a network error";
    case lanesInProgress:
      return "operation in progress";
    case lanesTimeout:  // the message names the limit: LANES_TIMEOUT or LANES_BOOTSTRAP_TIMEOUT
      return "operation timed out";
    default:
      return "unknown result code";
  }
}

const char* lanesGetLastError(lanesComm_t comm) { return lastErrorText(comm); }

}  // extern "C"
