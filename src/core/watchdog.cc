#include "core/watchdog.h"

#include <algorithm>
#include <cstdio>

#include "core/comm.h"
#include "core/env.h"
#include "core/log.h"

namespace lanes {
namespace {

// Long enough for a loaded machine's monitor threads to answer; short next
// to any LANES_TIMEOUT worth setting.
constexpr double kQuerySeconds = 2.0;
// Ranks named per category; more are counted.
constexpr size_t kMaxNamed = 8;

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", s);
  return buf;
}

// Whether a peer is in the same operation (running it, or failed in it).
bool inStep(const ProgressReport& r, const HangInfo& hang) {
  return r.state != ProgressReport::State::Idle && r.current >= 0 && r.currentOp == hang.op &&
         r.currentOps == hang.ops;
}

std::string peerState(const ProgressReport& r) {
  return r.rank < 0 ? "no answer to the progress query" : r.describe();
}

std::string joinNamed(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < kMaxNamed; ++i)
    out += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  if (items.size() > kMaxNamed) out += " and " + std::to_string(items.size() - kMaxNamed) + " more";
  return out;
}

std::string opDescription(const HangInfo& hang) {
  if (hang.seq < 0)
    return hang.label + " (" + describeSignature(hang.op) +
           (hang.ops > 1 ? " and " + std::to_string(hang.ops - 1) + " more call(s)" : "") + ")";
  ProgressReport r;
  r.current = hang.seq;
  r.currentOp = hang.op;
  r.currentOps = hang.ops;
  return r.currentDescription();
}

}  // namespace

void attachWatchdog(lanesComm* comm) {
  comm->watch.checkMismatch = envBool("LANES_CHECK_MISMATCH", false);
  comm->bootstrap->setProgressSource([comm] {
    ProgressReport r = comm->watch.progress.snapshot();
    r.asyncError = comm->asyncError.load();
    r.rank = comm->rank;
    return r.encode();
  });
}

std::string describeHang(const std::string& lead, int self, const HangInfo& hang,
                         const std::vector<ProgressReport>& reports) {
  std::vector<std::string> waiting, absent;
  for (int p : hang.waitingFor) {
    if (p < 0 || p >= static_cast<int>(reports.size()) || p == self) continue;
    waiting.push_back("rank " + std::to_string(p) + " (" + peerState(reports[p]) + ")");
  }
  // Which ranks are not in the operation at all: for a collective every rank
  // must be; send/recv involve only the peers it waits for.
  // (Known only for a running operation: hang.seq >= 0.)
  bool collective = !isPointToPoint(hang.op.kind) && hang.seq >= 0;
  for (int p = 0; collective && p < static_cast<int>(reports.size()); ++p) {
    if (p == self) continue;
    if (std::find(hang.waitingFor.begin(), hang.waitingFor.end(), p) != hang.waitingFor.end())
      continue;
    const ProgressReport& r = reports[p];
    if (r.rank >= 0 && inStep(r, hang)) continue;
    absent.push_back("rank " + std::to_string(p) + " (" + peerState(r) + ")");
  }
  std::string s = lead;
  if (!waiting.empty()) s += ": still waiting for " + joinNamed(waiting);
  if (!absent.empty())
    s += std::string(waiting.empty() ? ": " : "; ") + "not in this operation: " + joinNamed(absent);
  if (waiting.empty() && absent.empty()) s += ": every peer reports being in it too";
  s += ". Check that every rank issues the same collectives in the same order with the same "
       "arguments (LANES_CHECK_MISMATCH=1 names a mismatch); LANES_TIMEOUT sets the limit";
  return s;
}

std::vector<ProgressReport> queryPeers(lanesComm* comm) {
  std::vector<int> peers;
  for (int p = 0; p < comm->nranks; ++p)
    if (p != comm->rank) peers.push_back(p);
  double limit = std::min(kQuerySeconds, comm->options.timeoutSeconds);
  std::vector<std::vector<uint8_t>> answers =
      comm->bootstrap->queryProgress(peers, Deadline::after(limit));
  std::vector<ProgressReport> reports(static_cast<size_t>(comm->nranks));
  for (size_t i = 0; i < peers.size(); ++i) {
    ProgressReport r;
    if (!answers[i].empty() && ProgressReport::decode(answers[i], &r) && r.rank == peers[i])
      reports[static_cast<size_t>(peers[i])] = r;
  }
  return reports;
}

Status diagnoseTimeout(lanesComm* comm, const HangInfo& hang, const Status& executorError) {
  std::vector<ProgressReport> reports = queryPeers(comm);
  std::string lead = opDescription(hang) + " timed out after " +
                     seconds(comm->options.timeoutSeconds) + " s on " + comm->describe();
  std::string s = describeHang(lead, comm->rank, hang, reports);
  // The executor's own view (which step, how many bytes), without its advice.
  std::string detail = executorError.message();
  detail = detail.substr(0, detail.find(". Check that"));
  if (!detail.empty()) s += " (executor: " + detail + ")";
  return timeoutError(s);
}

Status explainClosedByTimeout(lanesComm* comm, const HangInfo& hang, const Status& closedError) {
  std::vector<ProgressReport> reports = queryPeers(comm);
  std::vector<std::string> gaveUp;
  for (const ProgressReport& r : reports)
    if (r.rank >= 0 && r.rank != comm->rank && r.asyncError == lanesTimeout)
      gaveUp.push_back("rank " + std::to_string(r.rank));
  if (gaveUp.empty()) return Status::ok();
  std::string lead = opDescription(hang) + " stopped on " + comm->describe() + " because " +
                     joinNamed(gaveUp) + " timed out (LANES_TIMEOUT " +
                     seconds(comm->options.timeoutSeconds) + " s) and closed " +
                     (gaveUp.size() == 1 ? "its" : "their") + " connections";
  HangInfo h = hang;
  h.waitingFor.clear();  // the executor failed on a closed port, not on a wait
  std::string s = describeHang(lead, comm->rank, h, reports);
  s += " (executor: " + closedError.message() + ")";
  return timeoutError(s);
}

}  // namespace lanes
