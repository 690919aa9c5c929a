// lanesCommRevoke: this rank stops using a communicator. Its operations still
// waiting return, later ones are refused (checkAbort), yet the communicator
// has not failed: no asyncError, no notice to peers, and its control mesh
// stays up for split and shrink. Its data connections close, so a peer's
// operation with this rank fails too: every rank is expected to revoke.
#include "core/comm_registry.h"
#include "core/errors.h"
#include "core/init.h"

using namespace lanes;

namespace {

Status revoke(lanesComm* comm, int flags) {
  if (flags != 0)
    return invalidArgument("lanesCommRevoke: revokeFlags is " + std::to_string(flags) +
                           "; it must be 0 (no flags are defined)");
  LANES_RETURN_IF_ERROR(awaitInit(comm));  // its connections are made by then
  if (comm->failure.revoked.exchange(true)) return Status::ok();
  {
    // As in fail(): the hooks release device streams parked on flags. They
    // quote failure.message, which checkAbort() and lanesGetLastError only
    // read once asyncError is set, so saying "revoked" there changes nothing else.
    std::lock_guard<std::mutex> lock(comm->failure.mutex);
    if (comm->failure.asyncError.load() == lanesSuccess)
      comm->failure.message = "communicator " + comm->describe() + " was revoked (lanesCommRevoke)";
    comm->runFailureHooksLocked();
  }
  comm->closeConnections();
  return Status::ok();
}

}  // namespace

extern "C" lanesResult_t lanesCommRevoke(lanesComm_t comm, int revokeFlags) {
  CommRef ref(comm);
  if (!ref) return report(nullptr, notLive("lanesCommRevoke"));
  return report(comm, revoke(comm, revokeFlags));
}
