#include "tools/lanes_flight_analysis.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

namespace lanes {
namespace {

bool unfinished(FlightState s) {
  return s == FlightState::Running || s == FlightState::Enqueued || s == FlightState::Failed;
}

std::string rankList(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) s += i + 1 == ranks.size() ? " and " : ", ";
    s += std::to_string(ranks[i]);
  }
  return s;
}

// "rank 2 waits", "ranks 0 and 1 wait".
std::string ranksDo(const std::vector<int>& ranks, const char* one, const char* many) {
  return rankList(ranks) + " " + (ranks.size() == 1 ? one : many);
}

std::string seconds(int64_t us) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(us) * 1e-6);
  return text;
}

// What one rank's dump says of it.
struct RankView {
  const FlightDump* dump = nullptr;
  const FlightRecord* lastCompleted = nullptr;
  const FlightRecord* stopped = nullptr;  // the oldest unfinished operation
  uint64_t issued = 0;                    // operations begun
  const FlightRecord* find(uint64_t id) const {
    for (const FlightRecord& r : dump->records)
      if (r.id == id) return &r;
    return nullptr;
  }
};

// Where a rank stopped: its oldest operation still running or enqueued;
// else its newest, if that one failed. A failure it lived through (a call
// refused, then others completed) is not where it stopped.
RankView viewOf(const FlightDump& d) {
  RankView v;
  v.dump = &d;
  v.issued = d.header.issued;
  for (const FlightRecord& r : d.records) {
    if (r.state == FlightState::Completed) v.lastCompleted = &r;
    if (v.stopped == nullptr &&
        (r.state == FlightState::Running || r.state == FlightState::Enqueued))
      v.stopped = &r;
  }
  if (v.stopped == nullptr && !d.records.empty() && d.records.back().state == FlightState::Failed)
    v.stopped = &d.records.back();
  return v;
}

std::string describeRank(const RankView& v) {
  const FlightDumpHeader& h = v.dump->header;
  std::string s = "rank " + std::to_string(h.rank) + " (" + h.host + " pid " +
                  std::to_string(h.pid) + ", dumped on " + h.reason + "): ";
  s += v.lastCompleted ? "last completed #" + std::to_string(v.lastCompleted->id) + " " +
                             v.lastCompleted->describeCall()
                       : "no operation completed";
  if (v.stopped != nullptr) {
    const FlightRecord& r = *v.stopped;
    s += "; #" + std::to_string(r.id) + " " + r.describeCall() + " " + flightStateName(r.state);
    if (!r.plan.empty()) s += " on " + r.plan;
    const int64_t end = r.endedUs != 0 ? r.endedUs : h.dumpedUs;
    s += " after " + seconds(end - r.issuedUs);
    if (!r.waitingFor.empty()) s += ", waiting for " + rankList(r.waitingFor);
  } else {
    s += "; nothing in flight";
  }
  s += " (" + std::to_string(v.issued) + " operations issued)";
  if (!h.error.empty()) s += "\n      error: " + h.error;
  return s;
}

FlightFinding analyzeComm(const std::string& commId, const std::vector<const FlightDump*>& dumps) {
  FlightFinding f;
  f.commId = commId;
  const int nranks = dumps.front()->header.nranks;
  std::map<int, RankView> views;
  for (const FlightDump* d : dumps) views[d->header.rank] = viewOf(*d);
  for (const auto& [rank, v] : views) f.rankLines.push_back(describeRank(v));

  // The operation the job stopped at: the oldest one some rank has not finished.
  std::optional<uint64_t> stuck;
  for (const auto& [rank, v] : views)
    if (v.stopped != nullptr && (!stuck || v.stopped->id < *stuck)) stuck = v.stopped->id;

  // Ranks that disagree on a call (send/recv differ by side; they are not compared).
  for (const auto& [rank, v] : views) {
    if (rank == views.begin()->first) continue;
    const RankView& base = views.begin()->second;
    for (const FlightRecord& r : v.dump->records) {
      const FlightRecord* other = base.find(r.id);
      if (other == nullptr || r.name == "send" || r.name == "recv" || other->name == "send" ||
          other->name == "recv")
        continue;
      if (r.describeCall() != other->describeCall()) {
        f.verdicts.push_back("ranks disagree on operation #" + std::to_string(r.id) + ": rank " +
                             std::to_string(base.dump->header.rank) + " called " +
                             other->describeCall() + ", rank " + std::to_string(rank) + " called " +
                             r.describeCall());
        break;
      }
    }
  }

  if (stuck) {
    const FlightRecord* call = nullptr;
    std::vector<int> inIt, notCalled, done, missing;
    std::set<int> waitedFor;
    for (const auto& [rank, v] : views) {
      const FlightRecord* r = v.find(*stuck);
      if (r != nullptr && call == nullptr) call = r;
      if (v.issued <= *stuck)
        notCalled.push_back(rank);
      else if (r != nullptr && unfinished(r->state))
        inIt.push_back(rank);
      else
        done.push_back(rank);
      if (r != nullptr) waitedFor.insert(r->waitingFor.begin(), r->waitingFor.end());
    }
    for (int r = 0; r < nranks; ++r)
      if (!views.count(r)) missing.push_back(r);
    const std::string what =
        "operation #" + std::to_string(*stuck) + (call ? " (" + call->describeCall() + ")" : "");
    for (int r : notCalled) {
      const RankView& v = views[r];
      std::string last = v.issued == 0 ? "it issued no operation"
                                       : "its last operation is #" + std::to_string(v.issued - 1);
      if (const FlightRecord* l = v.issued ? v.find(v.issued - 1) : nullptr)
        last += " " + l->describeCall() + ", " + flightStateName(l->state);
      f.verdicts.insert(f.verdicts.begin(), "rank " + std::to_string(r) + " never called " + what +
                                                " that " + ranksDo(inIt, "waits", "wait") +
                                                " in: " + last);
    }
    for (int r : missing) {
      std::string s = "no dump from rank " + std::to_string(r);
      if (waitedFor.count(r)) s += ", which " + ranksDo(inIt, "waits", "wait") + " for in " + what;
      f.verdicts.push_back(s +
                           ": it died, or has not failed itself (a rank dumps on a timeout, a "
                           "failure, an abort, or SIGUSR1: send it one)");
    }
    if (!inIt.empty()) {
      std::string s = rankList(inIt) + (inIt.size() == 1 ? " is" : " are") + " in " + what;
      std::vector<int> waited(waitedFor.begin(), waitedFor.end());
      if (!waited.empty()) s += ", waiting for " + rankList(waited);
      if (!done.empty()) s += "; " + rankList(done) + " finished it";
      f.verdicts.push_back(s);
    }
  } else {
    f.verdicts.push_back("no operation in flight on any rank that dumped");
  }
  return f;
}

}  // namespace

std::vector<FlightFinding> analyzeFlightDumps(const std::vector<FlightDump>& dumps) {
  // The newest dump of each rank of each communicator.
  std::map<std::string, std::map<int, const FlightDump*>> byComm;
  for (const FlightDump& d : dumps) {
    const FlightDump*& slot = byComm[d.header.commId][d.header.rank];
    if (slot == nullptr || d.header.dumpedUs > slot->header.dumpedUs) slot = &d;
  }
  std::vector<FlightFinding> out;
  for (const auto& [id, ranks] : byComm) {
    std::vector<const FlightDump*> list;
    for (const auto& [rank, d] : ranks) list.push_back(d);
    out.push_back(analyzeComm(id, list));
  }
  return out;
}

std::string formatFindings(const std::vector<FlightFinding>& findings,
                           const std::vector<FlightDump>& dumps) {
  std::string out;
  for (const FlightFinding& f : findings) {
    std::string name;
    int nranks = 0;
    std::set<int> ranks;
    for (const FlightDump& d : dumps)
      if (d.header.commId == f.commId) {
        name = d.header.commName;
        nranks = d.header.nranks;
        ranks.insert(d.header.rank);
      }
    out += "communicator " + f.commId + (name.empty() ? "" : " \"" + name + "\"") + ": " +
           std::to_string(nranks) + " ranks, dumps from " + std::to_string(ranks.size()) + "\n";
    for (const std::string& v : f.verdicts) out += "  * " + v + "\n";
    for (const std::string& r : f.rankLines) out += "    " + r + "\n";
  }
  return out;
}

}  // namespace lanes
