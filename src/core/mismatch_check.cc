#include "core/mismatch_check.h"

#include <algorithm>
#include <map>

#include "core/comm.h"
#include "core/watchdog.h"

namespace lanes {
namespace {

// Bootstrap tags of the exchanges (below 2^31; shrink uses "SHK").
constexpr uint32_t kCollCheckTag = 0x4d434b00u;  // "MCK" 0
constexpr uint32_t kP2pCheckTag = 0x4d434b01u;   // "MCK" 1
// Each wait is sliced so an abort of the communicator is seen promptly.
constexpr double kSliceSeconds = 0.2;

// What the exchange of one communicator waits on, for a timeout's diagnosis.
struct Exchange {
  lanesComm* comm;
  HangInfo hang;
  Deadline deadline;
};

// Receives one peer's signatures; lanesTimeout only once the deadline passed.
Status receive(const Exchange& x, int peer, uint32_t tag, std::vector<uint8_t>* out) {
  for (;;) {
    LANES_RETURN_IF_ERROR(x.comm->checkAbort());
    Deadline slice = std::min(Deadline::after(kSliceSeconds), x.deadline,
                              [](const Deadline& a, const Deadline& b) { return a.at() < b.at(); });
    Status st = x.comm->bootstrap->recv(peer, tag, out, slice);
    if (st.isOk() || st.code() != lanesTimeout || x.deadline.expired()) return st;
  }
}

// Sends each peer its payload, then gathers theirs; a peer that does not
// answer in time makes a timeout naming every peer still missing.
Status swap(Exchange& x, uint32_t tag, const std::map<int, std::vector<uint8_t>>& mine,
            std::map<int, std::vector<uint8_t>>* theirs) {
  for (const auto& [p, bytes] : mine)
    LANES_RETURN_IF_ERROR(x.comm->bootstrap->send(p, tag, bytes.data(), bytes.size()));
  for (auto it = mine.begin(); it != mine.end(); ++it) {
    Status st = receive(x, it->first, tag, &(*theirs)[it->first]);
    if (st.isOk()) continue;
    if (st.code() != lanesTimeout) return st;
    x.hang.waitingFor.push_back(it->first);
    for (auto rest = std::next(it); rest != mine.end(); ++rest) {
      std::vector<uint8_t> late;
      if (!x.comm->bootstrap->recv(rest->first, tag, &late, Deadline::after(0)).isOk())
        x.hang.waitingFor.push_back(rest->first);
    }
    Status diag = diagnoseTimeout(x.comm, x.hang, timeoutError(""));
    // The control streams are out of step now: later calls must fail too.
    x.comm->fail(diag.code(), diag.message());
    return diag;
  }
  return Status::ok();
}

Status decodeFrom(int peer, const std::vector<uint8_t>& bytes, uint64_t* index,
                  std::vector<OpSignature>* out) {
  Status st = decodeSignatures(bytes, index, out);
  if (!st.isOk())
    return Status(st.code(),
                  "LANES_CHECK_MISMATCH: rank " + std::to_string(peer) + ": " + st.message());
  return Status::ok();
}

Status checkCollectives(lanesComm* comm, const std::vector<OpSignature>& colls) {
  const uint64_t index = comm->watch.collectivesChecked;
  comm->watch.collectivesChecked += colls.size();
  Exchange x{comm, {}, Deadline::after(comm->options.timeoutSeconds)};
  x.hang.label = "the LANES_CHECK_MISMATCH exchange of collective #" + std::to_string(index);
  x.hang.op = colls.front();
  x.hang.ops = static_cast<uint32_t>(colls.size());
  std::vector<int> peers;
  std::map<int, std::vector<uint8_t>> mine, got;
  for (int p = 0; p < comm->nranks; ++p) {
    if (p == comm->rank) continue;
    peers.push_back(p);
    mine[p] = encodeSignatures(index, colls);
  }
  LANES_RETURN_IF_ERROR(swap(x, kCollCheckTag, mine, &got));
  std::vector<std::vector<OpSignature>> byRank(static_cast<size_t>(comm->nranks));
  byRank[static_cast<size_t>(comm->rank)] = colls;
  for (int p : peers) {
    uint64_t theirIndex = 0;
    LANES_RETURN_IF_ERROR(decodeFrom(p, got[p], &theirIndex, &byRank[static_cast<size_t>(p)]));
    if (theirIndex != index)
      return invalidUsage("LANES_CHECK_MISMATCH: rank " + std::to_string(p) +
                          " is at collective #" + std::to_string(theirIndex) + " while rank " +
                          std::to_string(comm->rank) + " is at #" + std::to_string(index) +
                          " on this communicator; the ranks issued different collectives");
  }
  std::string mismatch = findCollectiveMismatch(byRank, index);
  if (mismatch.empty()) return Status::ok();
  return invalidUsage(mismatch +
                      ". Every rank must issue the same collectives in the same order with the "
                      "same count, datatype, op and root; LANES_CHECK_MISMATCH stopped it before "
                      "any data moved, on every rank, so the communicator stays usable");
}

Status checkP2p(lanesComm* comm, const std::map<int, std::vector<OpSignature>>& byPeer) {
  Exchange x{comm, {}, Deadline::after(comm->options.timeoutSeconds)};
  x.hang.label = "the LANES_CHECK_MISMATCH exchange of a send/recv group";
  x.hang.op = byPeer.begin()->second.front();
  x.hang.ops = 0;
  std::vector<int> peers;
  std::map<int, std::vector<uint8_t>> mine, got;
  for (const auto& [p, sigs] : byPeer) {
    peers.push_back(p);
    mine[p] = encodeSignatures(0, sigs);
    x.hang.ops += static_cast<uint32_t>(sigs.size());
  }
  LANES_RETURN_IF_ERROR(swap(x, kP2pCheckTag, mine, &got));
  for (int p : peers) {
    uint64_t unused = 0;
    std::vector<OpSignature> theirs;
    LANES_RETURN_IF_ERROR(decodeFrom(p, got[p], &unused, &theirs));
    std::string mismatch = findP2pMismatch(comm->rank, byPeer.at(p), p, theirs);
    if (!mismatch.empty())
      return invalidUsage(mismatch +
                          ". Matching sends and receives must agree in count and datatype "
                          "(LANES_CHECK_MISMATCH stopped the group before any data moved)");
  }
  return Status::ok();
}

Status checkComm(lanesComm* comm, const std::vector<const Request*>& reqs) {
  std::vector<OpSignature> colls;
  std::map<int, std::vector<OpSignature>> byPeer;
  for (const Request* r : reqs) {
    if (!r->isP2p) {
      colls.push_back(signatureOf(*r));
    } else if (r->peer != comm->rank && r->bytes > 0) {
      byPeer[r->peer].push_back(signatureOf(*r));  // to self: prepareP2p pairs them
    }
  }
  if (!colls.empty()) LANES_RETURN_IF_ERROR(checkCollectives(comm, colls));
  if (!byPeer.empty()) LANES_RETURN_IF_ERROR(checkP2p(comm, byPeer));
  return Status::ok();
}

}  // namespace

Status checkCallsMatch(const std::vector<Request>& requests) {
  std::vector<lanesComm*> comms;
  std::map<lanesComm*, std::vector<const Request*>> of;
  for (const Request& r : requests) {
    if (!r.comm->watch.checkMismatch) continue;
    if (of.find(r.comm) == of.end()) comms.push_back(r.comm);
    of[r.comm].push_back(&r);
  }
  // Sends never block on the receiver (the monitor threads file them), so
  // checking communicators in any order cannot deadlock.
  for (lanesComm* comm : comms) {
    LANES_RETURN_IF_ERROR(comm->checkAbort());
    LANES_RETURN_IF_ERROR(checkComm(comm, of[comm]));
  }
  return Status::ok();
}

}  // namespace lanes
