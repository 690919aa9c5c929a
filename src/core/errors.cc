#include "core/errors.h"

#include <string>

#include "base/log.h"
#include "base/nccl_env.h"
#include "core/comm.h"
#include "core/comm_registry.h"
#include "core/observers.h"

namespace lanes {
namespace {
thread_local std::string tlsLastError;
}

lanesResult_t report(lanesComm_t comm, const Status& status) {
  if (status.isOk()) return lanesSuccess;
  if (status.code() == lanesInProgress) return lanesInProgress;  // not an error
  tlsLastError = status.message();
  int rank = -1;
  bool counted = false;
  if (comm != nullptr) {
    CommRef ref(comm);
    if (ref) {
      std::lock_guard<std::mutex> lock(comm->errorMutex);
      comm->lastError = status.message();
      rank = comm->rank;
      // (A call on a communicator still being made in the background may fail
      // while its init attaches the metrics: those count from then on.)
      if (comm->observed.load(std::memory_order_acquire) && comm->metrics) {
        comm->metrics->countError(status.code());
        counted = true;
      }
    }
  }
  if (!counted && metricsOn()) MetricsRegistry::process().countError(status.code());
  LANES_WARN(Coll, rank, "%s",
             ncclSpelling(std::string(lanesGetErrorString(status.code())) + ": " + status.message())
                 .c_str());
  return status.code();
}

Status notLive(const char* fn) {
  return invalidArgument(std::string(fn) +
                         ": comm is NULL, was already destroyed, or is not a Lanes communicator");
}

const char* lastErrorText(lanesComm_t comm) {
  CommRef ref(comm);
  if (comm != nullptr && ref) {
    thread_local std::string copy;
    {
      std::lock_guard<std::mutex> lock(comm->errorMutex);
      copy = comm->lastError;
    }
    // No call on this communicator failed yet, but the communicator did (an
    // asynchronous error, lanesCommGetAsyncError): that is what to read.
    if (copy.empty() && comm->failure.asyncError.load() != lanesSuccess) {
      std::lock_guard<std::mutex> lock(comm->failure.mutex);
      copy = comm->failure.message;
    }
    if (!copy.empty()) {
      copy = ncclSpelling(std::move(copy));
      return copy.c_str();
    }
  }
  if (tlsLastError.empty()) return "no error";
  thread_local std::string spelled;
  spelled = ncclSpelling(tlsLastError);
  return spelled.c_str();
}

}  // namespace lanes
