// Hang diagnosis. When an operation waited past LANES_TIMEOUT, the rank asks
// every peer over the bootstrap control mesh what it is running and what it
// completed last (the monitor threads answer even while their executors are
// stuck), and names in one sentence the peers it still waits for and the
// ranks that are not in the operation at all.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/op_signature.h"
#include "core/progress.h"

struct lanesComm;

namespace lanes {

// Makes a new communicator answer progress queries and reads
// LANES_CHECK_MISMATCH. Called once by initComm, before any operation.
void attachWatchdog(lanesComm* comm);

// The operation a diagnosis is about.
struct HangInfo {
  std::string label;            // "allreduce #42"
  int64_t seq = -1;             // the operation's number; -1: not running yet (the label says what)
  OpSignature op;               // its first call
  uint32_t ops = 1;             // calls in its group
  std::vector<int> waitingFor;  // peers it still waited for (may be empty)
};

// Builds the diagnosis sentence from what the peers reported (reports[r] for
// rank r; a report with rank -1 means "no answer"; this rank's own entry is
// ignored). `lead` opens the sentence, e.g. "allreduce #42 (...) timed out
// after 300 s on rank 0 of 4". Pure, for tests.
// Causes come first: ranks that did not answer (stalled), then ranks not in
// the operation, then `event` (what else happened), then the peers waiting
// in it too.
std::string describeHang(const std::string& lead, int self, const HangInfo& hang,
                         const std::vector<ProgressReport>& reports, const std::string& event = "");

// Asks every peer for its progress, bounded by a couple of seconds.
std::vector<ProgressReport> queryPeers(lanesComm* comm);

// A timeout of `hang` on this rank (`executorError`: what the executor saw):
// lanesTimeout with the full diagnosis.
Status diagnoseTimeout(lanesComm* comm, const HangInfo& hang, const Status& executorError);

// A connection closed under `hang` and no rank was reported dead: when a peer
// closed it because it timed out in this operation, this rank fails with
// lanesTimeout and the same kind of diagnosis (returned); otherwise OK.
Status explainClosedByTimeout(lanesComm* comm, const HangInfo& hang, const Status& closedError);

// `failure` (a peer died or left) ended a collective that waited at least a
// second: live ranks that never called it are the root cause, named first,
// ahead of `failure`'s own sentence. Returns `failure` when there are none.
Status nameRanksNeverCalled(lanesComm* comm, const HangInfo& hang, const Status& failure);

}  // namespace lanes
