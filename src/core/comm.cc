#include "core/comm.h"

#include <cinttypes>
#include <cstdio>

#include "base/log.h"
#include "core/flight_dump.h"

void lanesComm::fail(lanesResult_t code, const std::string& message, int deadRank,
                     const std::string& cause) {
  {
    std::lock_guard<std::mutex> lock(failure.mutex);
    if (failure.asyncError.load() != lanesSuccess)
      return;  // the first failure is the one to report
    failure.message = message;
    failure.deadRank = deadRank;
    failure.cause = cause;
    failure.asyncError.store(code);
    runFailureHooksLocked();
  }
  LANES_INFO(Init, rank, "communicator failed: %s", message.c_str());
  closeConnections();
  if (lanes::flightHasUnfinished(this))
    (void)lanes::dumpFlightRecord(this, code == lanesTimeout ? "timeout" : "failure");
}

void lanesComm::runFailureHooksLocked() {
  for (auto& hook : failure.hooks)
    if (hook) hook(failure.message);
}

void lanesComm::closeConnections() {
  std::lock_guard<std::mutex> lock(links.mutex);
  for (auto& c : links.connections)
    if (c) c->close();
}

lanes::Status lanesComm::checkAbort() {
  if (failure.aborted.load(std::memory_order_relaxed))
    return lanes::Status(lanesInvalidUsage,
                         "communicator " + describe() +
                             " was aborted (lanesCommAbort) while the "
                             "operation waited; destroy it and create a new one");
  // Before asyncError: a revoke is what the user asked for, and names what is left to do.
  if (failure.revoked.load(std::memory_order_acquire))
    return lanes::Status(lanesInvalidUsage,
                         "communicator " + describe() +
                             " was revoked (lanesCommRevoke); only destroy, abort, split and "
                             "shrink remain");
  int err = failure.asyncError.load(std::memory_order_acquire);
  if (err != lanesSuccess) {
    std::lock_guard<std::mutex> lock(failure.mutex);
    return lanes::Status(static_cast<lanesResult_t>(err), failure.message);
  }
  return lanes::Status::ok();
}

std::string lanesComm::describe() const {
  std::string s = "rank " + std::to_string(rank) + " of " + std::to_string(nranks);
  if (!options.name.empty()) s += " (" + options.name + ")";
  return s;
}

std::string lanesComm::idText() const {
  char text[24];
  std::snprintf(text, sizeof text, "0x%016" PRIx64,
                bootstrap ? bootstrap->id().commId : uint64_t{0});
  return text;
}
