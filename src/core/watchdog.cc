#include "core/watchdog.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "base/log.h"
#include "core/comm.h"

namespace lanes {
namespace {

// Long enough for a loaded machine's monitor threads to answer; short next
// to any LANES_TIMEOUT worth setting.
constexpr double kQuerySeconds = 2.0;
// Ranks named per category; more are counted.
constexpr size_t kMaxNamed = 8;
// A rank idle while this one waited this long in a collective did not just
// arrive late by a scheduling hiccup: it never called the operation.
constexpr auto kStuckFor = std::chrono::seconds(1);
// Tolerance when comparing a peer's state age with this rank's wait.
constexpr double kStateSlackSeconds = 0.25;

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
  comm->watch.checkMismatch = comm->config.checkMismatch;
  comm->bootstrap->setProgressSource([comm] {
    ProgressReport r = comm->watch.progress.snapshot();
    r.asyncError = comm->failure.asyncError.load();
    r.rank = comm->rank;
    return r.encode();
  });
}

std::string describeHang(const std::string& lead, int self, const HangInfo& hang,
                         const std::vector<ProgressReport>& reports, const std::string& event) {
  // Causes first: ranks that do not answer (a live monitor thread always
  // does, so the process is stopped or cut off) and ranks not in the
  // operation at all. Peers that answer from inside it are waiting too,
  // however stuck they look: a rank blocked behind a stalled one is healthy.
  // Which ranks are not in the operation is known for a running collective
  // only (hang.seq >= 0); send/recv involve only the peers it waits for.
  std::vector<std::string> stalled, absent, waiting;
  bool collective = !hang.op.isPointToPoint() && hang.seq >= 0;
  for (int p = 0; p < static_cast<int>(reports.size()); ++p) {
    if (p == self) continue;
    bool waited =
        std::find(hang.waitingFor.begin(), hang.waitingFor.end(), p) != hang.waitingFor.end();
    if (!waited && !collective) continue;
    const ProgressReport& r = reports[p];
    std::string named = "rank " + std::to_string(p) + " (" + peerState(r) + ")";
    if (r.rank < 0)
      stalled.push_back(named);
    else if (collective && !inStep(r, hang))
      absent.push_back(named);
    else if (waited)
      waiting.push_back(named);
  }
  std::vector<std::string> parts;
  if (!stalled.empty())
    parts.push_back("stalled: " + joinNamed(stalled) +
                    ", alive but not responding (a stopped process: SIGSTOP or a debugger; a "
                    "host out of CPU or memory; or a network cut)");
  if (!absent.empty()) parts.push_back("not in this operation: " + joinNamed(absent));
  if (!event.empty()) parts.push_back(event);
  if (!waiting.empty())
    parts.push_back("still waiting for " + joinNamed(waiting) +
                    (stalled.empty() && absent.empty() ? "" : ", in it too"));
  if (parts.empty()) parts.push_back("every peer reports being in it too");
  std::string s = lead;
  for (size_t i = 0; i < parts.size(); ++i) s += (i == 0 ? ": " : "; ") + parts[i];
  if (!stalled.empty() && absent.empty())
    return s +
           ". Every rank waits for a stalled one: find out what stopped it (kill -CONT "
           "resumes a stopped process); LANES_TIMEOUT sets the limit";
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
  // The rank that timed out is a messenger: what it waited for comes first.
  std::string lead = opDescription(hang) + " stopped on " + comm->describe();
  std::string event = joinNamed(gaveUp) + " timed out (LANES_TIMEOUT " +
                      seconds(comm->options.timeoutSeconds) + " s) and closed " +
                      (gaveUp.size() == 1 ? "its" : "their") + " connections";
  HangInfo h = hang;
  h.waitingFor.clear();  // the executor failed on a closed port, not on a wait
  std::string s = describeHang(lead, comm->rank, h, reports, event);
  s += " (executor: " + closedError.message() + ")";
  return timeoutError(s);
}

Status nameRanksNeverCalled(lanesComm* comm, const HangInfo& hang, const Status& failure) {
  if (hang.seq < 0 || hang.op.isPointToPoint()) return failure;
  const ProgressTracker::Run run = comm->watch.progress.lastRun();
  const auto now = ProgressTracker::Clock::now();
  if (run.ended < run.began || run.ended - run.began < kStuckFor) return failure;
  const double waited = std::chrono::duration<double>(run.ended - run.began).count();
  const double sinceBegan = std::chrono::duration<double>(now - run.began).count();
  std::vector<ProgressReport> reports = queryPeers(comm);
  std::vector<std::string> absent;
  for (int p = 0; p < comm->nranks; ++p) {
    ProgressReport r = reports[static_cast<size_t>(p)];
    if (p == comm->rank || r.rank < 0 || inStep(r, hang) || r.lastCompleted >= hang.seq) continue;
    // In that state since before this rank began the operation: it never
    // called it, rather than calling it late or failing on the way in.
    if (r.stateMs / 1000.0 + kStateSlackSeconds < sinceBegan) continue;
    r.asyncError = lanesSuccess;  // its communicator failed of the same cause: no news
    absent.push_back("rank " + std::to_string(p) + " (" + r.describe() + ")");
  }
  if (absent.empty()) return failure;
  return Status(failure.code(),
                opDescription(hang) + " could not complete on " + comm->describe() +
                    ": not in this operation: " + joinNamed(absent) + ", the likely root cause (" +
                    (absent.size() == 1 ? "it" : "they") +
                    " never called it while this rank waited " +
                    seconds(std::round(waited * 10) / 10) + " s); meanwhile " + failure.message());
}

}  // namespace lanes
