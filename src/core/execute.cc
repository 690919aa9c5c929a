// Turns queued requests into schedules, runs them, and finishes them (Avg).
#include "core/execute.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <thread>

#include "base/log.h"
#include "core/comm.h"
#include "core/mismatch_check.h"
#include "core/op_observer.h"
#include "core/plan_record.h"
#include "core/watchdog.h"
#include "exec/arena_sum.h"
#include "exec/device_path.h"
#include "exec/host_executor.h"
#include "kernels/cpu/reduce.h"
#include "observe/nvtx_ranges.h"
#include "planner/registry.h"

namespace lanes {
namespace {

// Elements of the result each rank divides for Avg.
size_t avgCount(const CollArgs& a) {
  switch (a.coll) {
    case CollType::AllReduce:
      return a.count;
    case CollType::ReduceScatter:
      return a.count;
    case CollType::Reduce:
      return a.rank == a.root ? a.count : 0;
    default:
      return 0;
  }
}

struct Prepared {
  std::unique_ptr<Schedule> schedule;
  int lane = 0;
  lanesComm* comm = nullptr;
  std::string label;
  std::unique_ptr<std::byte[]> scaledInput;  // PreMulSum's pre-multiplied copy
};

Status prepareCollective(Request& r, int lane, Prepared* out) {
  CollArgs args = r.args;
  size_t elem = datatypeSize(args.type);
  if (r.op.kind == RedOpKind::PreMulSum) {
    size_t n = inputCount(args);
    out->scaledInput = std::make_unique<std::byte[]>(std::max<size_t>(1, n * elem));
    if (n > 0) cpu::premultiply(out->scaledInput.get(), args.send, n, args.type, r.op.scalar);
    args.send = out->scaledInput.get();
  }
  args.redop = (r.op.kind == RedOpKind::Avg || r.op.kind == RedOpKind::PreMulSum) ? RedOpKind::Sum
                                                                                  : r.op.kind;
  size_t bytes = inputCount(args) * elem;
  const SelectionConfig& selection = r.comm->config.selection;
  AlgoChoice choice = r.comm->hostPlans.choose(args.coll, bytes, args.nranks, selection);
  if (choice.algo == AlgoId::SharedSum && (r.viaProxy || r.comm->sumArena == nullptr)) {
    // The proxy's copies take the transports (the planner priced them so);
    // without an arena (LANES_ALGO names shared_sum alone where none was
    // made), the cheapest of the others.
    SelectionConfig without = selection;
    without.sharedSumUsable = false;
    choice = chooseHostAlgorithm(args.coll, bytes, args.nranks, without);
  }
  explainPlanOnce(r.comm, collTypeName(args.coll), bytes, [&] {
    CallFacts facts;
    facts.coll = args.coll;
    facts.bytes = bytes;
    facts.nranks = args.nranks;
    return explainHostChoice(facts, selection);
  });
  // Staged copies the proxy runs were recorded as "proxy/<algorithm>" when enqueued.
  if (!r.viaProxy) notePlanOf(r.comm, collTypeName(args.coll), algoName(choice.algo), r.sendBytes);
  out->schedule = std::make_unique<Schedule>(r.comm->scratchPool);
  LANES_RETURN_IF_ERROR(
      buildSchedule(choice.algo, args, out->schedule.get(), r.comm->ringOrder,
                    selection.machine.hosts > 1 ? r.comm->hostOf : r.comm->packageOf));
  if (choice.algo == AlgoId::SharedSum && bytes > 0 && args.nranks > 1) {
    const size_t count = args.coll == CollType::ReduceScatter ? args.count : bytes / elem;
    out->schedule->arenaFirstChunk = r.comm->sumArena->reserve(
        ArenaSum::chunksFor(args.coll == CollType::ReduceScatter, count, elem, args.nranks));
  }
  // A compressed wire where it keeps every rank's bits alike: float32 sums
  // (an average and a pre-multiplied sum are sums here) on the ring.
  if (selection.wire != WireFormat::Native && choice.algo == AlgoId::Ring &&
      args.type == lanesFloat32 && args.redop == RedOpKind::Sum &&
      (args.coll == CollType::AllReduce || args.coll == CollType::ReduceScatter))
    out->schedule->wire = selection.wire;
  out->lane = lane;
  out->comm = r.comm;
  out->label = std::string(collTypeName(args.coll)) + " #" + std::to_string(r.comm->seq);
  LANES_TRACE(Plan, r.comm->rank, "%s: %zu bytes %s %s, %s (%s)", out->label.c_str(), bytes,
              datatypeName(args.type), redOpName(r.op.kind), algoName(choice.algo),
              choice.why.c_str());
  return Status::ok();
}

// All sends/recvs of one communicator in a group become one step on the p2p
// lane: per-peer FIFO keeps them matched in call order. Sends and receives to
// self are paired in order and become local copies.
Status prepareP2p(lanesComm* comm, std::vector<Request*>& reqs, Prepared* out) {
  if (!reqs.empty() && !reqs.front()->viaProxy) {
    uint64_t bytes = 0;
    for (const Request* r : reqs) bytes += r->isSend ? r->bytes : 0;
    notePlanOf(comm, "send/recv", "p2p", bytes);
  }
  out->schedule = std::make_unique<Schedule>(comm->scratchPool);
  out->schedule->name = "send/recv";
  out->schedule->type = lanesUint8;
  out->lane = kP2pLane;
  out->comm = comm;
  out->label = "send/recv group #" + std::to_string(comm->seq);
  Step& step = out->schedule->addStep();
  // A send whose buffer a receive of the same group overwrites (in-place
  // exchange) sends a snapshot taken before anything moves.
  auto overlapsAnyRecv = [&](const Request* s) {
    auto a = reinterpret_cast<uintptr_t>(s->sendbuf);
    for (const Request* r : reqs) {
      if (r->isSend || r->bytes == 0) continue;
      auto b = reinterpret_cast<uintptr_t>(r->recvbuf);
      if (a < b + r->bytes && b < a + s->bytes) return true;
    }
    return false;
  };
  std::vector<Request*> selfSends, selfRecvs;
  for (Request* r : reqs) {
    if (r->peer == comm->rank) {
      (r->isSend ? selfSends : selfRecvs).push_back(r);
      continue;
    }
    Op op;
    op.bytes = r->bytes;
    if (r->isSend) {
      op.kind = OpKind::Send;
      op.sendPeer = r->peer;
      op.src = r->sendbuf;
      if (r->bytes > 0 && overlapsAnyRecv(r)) {
        std::byte* copy = out->schedule->allocScratch(r->bytes);
        std::memcpy(copy, r->sendbuf, r->bytes);
        op.src = copy;
      }
    } else {
      op.kind = OpKind::Recv;
      op.recvPeer = r->peer;
      op.dst = r->recvbuf;
    }
    step.ops.push_back(op);
  }
  if (selfSends.size() != selfRecvs.size())
    return invalidUsage("rank " + std::to_string(comm->rank) + " posted " +
                        std::to_string(selfSends.size()) + " send(s) to itself but " +
                        std::to_string(selfRecvs.size()) +
                        " receive(s) from itself in one group; they must pair up");
  for (size_t i = 0; i < selfSends.size(); ++i) {
    if (selfSends[i]->bytes != selfRecvs[i]->bytes)
      return invalidUsage("send to self of " + std::to_string(selfSends[i]->bytes) +
                          " bytes is paired with a receive of " +
                          std::to_string(selfRecvs[i]->bytes) + " bytes");
    Op op;
    op.kind = OpKind::Copy;
    op.src = selfSends[i]->sendbuf;
    op.dst = selfRecvs[i]->recvbuf;
    op.bytes = selfSends[i]->bytes;
    step.ops.insert(step.ops.begin(), op);
  }
  return Status::ok();
}

// The error a failed run reports: a recorded peer failure names the rank
// that died, which beats whatever neighbour the executor was waiting on; a
// timeout names what every peer is doing (core/watchdog.h); and a live rank
// that never called the collective is named ahead of either.
Status explainFailure(lanesComm* comm, const Status& status, const HangInfo& hang) {
  Status recorded = comm->checkAbort();
  if (recorded.isOk() && status.code() == lanesRemoteError) {
    // A closed connection is often the echo of a failure elsewhere. A peer
    // that timed out in this operation closed its connections: then this
    // rank reports the timeout too, diagnosed. Asked first, so that it is
    // reported as promptly as the peer's own.
    Status timedOut = explainClosedByTimeout(comm, hang, status);
    if (!timedOut.isOk()) {
      comm->fail(timedOut.code(), timedOut.message());
      return timedOut;
    }
    // Or a peer died: the bootstrap's notice naming it is normally
    // milliseconds behind; wait for it briefly so the error names the rank
    // that died, not the messenger.
    Deadline grace = Deadline::after(2.0);
    Backoff backoff;
    while (recorded.isOk() && !grace.expired()) {
      backoff.pause();
      recorded = comm->checkAbort();
    }
  }
  if (!recorded.isOk() && status.code() != lanesInvalidUsage &&
      status.code() != lanesInvalidArgument) {
    Status failure(recorded.code(),
                   recorded.message() + " (while running: " + status.message() + ")");
    // (Not after an abort or revoke: the user ended the wait.)
    return recorded.code() == lanesRemoteError ? nameRanksNeverCalled(comm, hang, failure)
                                               : failure;
  }
  if (status.code() == lanesTimeout) {
    Status diagnosed = diagnoseTimeout(comm, hang, status);
    comm->fail(diagnosed.code(), diagnosed.message());
    return diagnosed;
  }
  if (status.code() == lanesRemoteError) {
    // A peer left (or its connection broke) with nobody reported dead.
    Status named = nameRanksNeverCalled(comm, hang, status);
    // The streams of this communicator are out of step now; later calls must fail too.
    comm->fail(named.code(), named.message());
    return named;
  }
  return status;
}

// One communicator's device batch in a group.
struct DeviceBatch {
  uint64_t commId = 0;  // 0: no bootstrap (one rank), never shared
  lanesComm* comm = nullptr;
  std::vector<Request>* requests = nullptr;
};

// The registry's choice, handed to the device paths with each batch.
constexpr PathChooser kChooser = {
    [](lanesComm* comm, const CallFacts& f) {
      return comm->devicePlans.choose(f, comm->config.selection);
    },
    [](const CallFacts& f, const SelectionConfig& c) { return chooseHostAlgorithm(f, c).algo; },
    [](lanesComm* comm, const CallFacts& f) {
      if (!logEnabled(LogLevel::Info, LogSubsys::Plan)) return;
      std::string what = std::string(collTypeName(f.coll)) + " on device buffers";
      if (f.p2p)
        what = "send/recv on device buffers";
      else if (!f.sameColl)
        what = "a batch of " + std::to_string(f.calls) + " collectives on device buffers";
      else if (f.calls > 1)
        what = std::string(collTypeName(f.coll)) + " batch on device buffers";
      explainPlanOnce(comm, what, f.bytes,
                      [&] { return explainDeviceChoice(f, comm->config.selection); });
    }};

Status enqueueBatch(const DeviceBatch& b) {
  LANES_RETURN_IF_ERROR(b.comm->checkAbort());
  const ObservedOp observed(b.comm, *b.requests);
  const cudaStream_t stream = b.requests->front().stream;
  Status status =
      enqueueDeviceRequests(*b.requests, stream, kChooser, [&observed] { observed.planned(); });
  observed.deviceEnqueued(*b.requests, stream, status);
  return status;
}

// Several ranks of one communicator issued by this thread (NCCL's
// single-thread multi-GPU style): each rank's enqueue may wait on the host
// for its peers' part (transport/channel/submit_ledger.h, exec/rank_meeting.h), so they go
// side by side, a thread each, all joined before the next communicator.
Status enqueueSideBySide(const std::vector<DeviceBatch>& ranks) {
  std::vector<Status> results(ranks.size());
  try {
    std::vector<std::jthread> workers;  // joined on every way out
    for (size_t i = 0; i < ranks.size(); ++i) {
      workers.emplace_back([&ranks, &results, i] {
        try {
          results[i] = enqueueBatch(ranks[i]);
        } catch (const std::exception& e) {
          results[i] = internalError(std::string("enqueueing a rank's device calls: ") + e.what());
        }
      });
    }
  } catch (const std::system_error& e) {
    return systemError(std::string("starting a thread per rank for a group of device calls: ") +
                       e.what());
  }
  for (const Status& s : results) LANES_RETURN_IF_ERROR(s);
  return Status::ok();
}

// The group's device batches in communicator-id order (the same on every
// rank, unlike pointers): thread ranks of one process that each hold a rank
// of several communicators meet in the same order, and every stream joins
// and forks the communicators' batches in that order.
Status enqueueDeviceBatches(std::map<lanesComm*, std::vector<Request>>& deviceOf) {
  if (deviceOf.size() == 1) {  // the common case: one communicator, nothing to order
    auto& [comm, requests] = *deviceOf.begin();
    return enqueueBatch({0, comm, &requests});
  }
  std::vector<DeviceBatch> batches;
  for (auto& entry : deviceOf) {
    lanesComm* comm = entry.first;
    batches.push_back({comm->bootstrap ? comm->bootstrap->id().commId : 0, comm, &entry.second});
  }
  std::sort(batches.begin(), batches.end(), [](const DeviceBatch& a, const DeviceBatch& b) {
    return a.commId != b.commId ? a.commId < b.commId : a.comm->rank < b.comm->rank;
  });
  // Runs of one communicator's ranks; each run of several goes side by side.
  std::vector<std::pair<size_t, size_t>> runs;
  for (size_t i = 0; i < batches.size();) {
    size_t j = i + 1;
    while (batches[i].commId != 0 && j < batches.size() && batches[j].commId == batches[i].commId)
      ++j;
    runs.emplace_back(i, j);
    i = j;
  }
  // Refused before anything is enqueued, so that no peer waits for a part
  // this rank will never issue.
  for (const auto& [begin, end] : runs) {
    if (end - begin < 2) continue;  // enqueued by this thread itself
    for (size_t k = begin; k < end; ++k)
      for (const Request& r : *batches[k].requests)
        if (streamIsPerThread(r.stream))
          return invalidUsage("one thread issues several ranks of " + batches[k].comm->describe() +
                              " in one group on cudaStreamPerThread, which names a different "
                              "stream on every thread: Lanes enqueues such ranks from a thread "
                              "each. Pass each rank's own stream.");
  }
  for (const auto& [begin, end] : runs) {
    if (end - begin > 1)
      LANES_RETURN_IF_ERROR(enqueueSideBySide({batches.begin() + begin, batches.begin() + end}));
    else
      LANES_RETURN_IF_ERROR(enqueueBatch(batches[begin]));
  }
  return Status::ok();
}

// Device requests go to the device path, one batch per communicator; the
// rest run here on host memory.
Status splitDeviceRequests(std::vector<Request>& requests, std::vector<Request>* hostOnly) {
  std::map<lanesComm*, std::vector<Request>> deviceOf;
  std::map<lanesComm*, bool> hasHost;
  for (Request& r : requests) {
    // A call that moves no bytes on this rank moves none anywhere (count 0):
    // a no-op, valid in any group, as in NCCL.
    if (r.sendBytes == 0 && r.recvBytes == 0) continue;
    if (r.onDevice)
      deviceOf[r.comm].push_back(r);
    else
      hasHost[r.comm] = true;
  }
  for (auto& [comm, reqs] : deviceOf) {
    if (hasHost.count(comm))
      return invalidUsage("one group mixes host-memory and device-memory buffers on " +
                          comm->describe() + "; issue them in separate groups");
  }
  LANES_RETURN_IF_ERROR(enqueueDeviceBatches(deviceOf));
  for (Request& r : requests)
    if (!r.onDevice && (r.sendBytes > 0 || r.recvBytes > 0)) hostOnly->push_back(r);
  return Status::ok();
}

}  // namespace

Status executeRequests(std::vector<Request>& all) {
  if (all.empty()) return Status::ok();
  if (Status s = checkCallsMatch(all); !s) {  // LANES_CHECK_MISMATCH=1 only
    observeRefusedBatch(all, s);
    return s;
  }
  std::vector<Request> requests;
  LANES_RETURN_IF_ERROR(splitDeviceRequests(all, &requests));
  if (requests.empty()) return Status::ok();
  // Host calls keep their place after device calls issued before them, and
  // never drive the connections at the same time as the device proxy.
  std::vector<lanesComm*> comms;
  for (Request& r : requests)
    if (std::find(comms.begin(), comms.end(), r.comm) == comms.end()) comms.push_back(r.comm);
  std::sort(comms.begin(), comms.end());  // a fixed lock order
  std::vector<std::unique_lock<std::mutex>> engines;
  for (lanesComm* comm : comms) {
    {
      std::lock_guard<std::mutex> lock(comm->devicePaths.mutex);
      if (comm->devicePaths.proxy)
        LANES_RETURN_IF_ERROR(
            comm->devicePaths.proxy->drain(Deadline::after(comm->options.timeoutSeconds)));
    }
    engines.emplace_back(comm->engineMutex);
  }
  return executeHostRequests(requests);
}

Status executeHostRequests(std::vector<Request>& requests) {
  if (requests.empty()) return Status::ok();
  // Per communicator: its p2p requests, and its collectives in call order.
  std::vector<lanesComm*> comms;
  for (Request& r : requests)
    if (std::find(comms.begin(), comms.end(), r.comm) == comms.end()) comms.push_back(r.comm);
  // The proxy's staged copies of device calls were recorded when enqueued.
  std::vector<ObservedOp> observed;
  if (!requests.front().viaProxy)
    for (lanesComm* comm : comms) observed.emplace_back(comm, requests);
  std::map<lanesComm*, std::vector<Request*>> p2pOf;
  std::map<lanesComm*, int> collIndex;
  std::vector<Prepared> prepared;
  auto fail = [&](const Status& status) {
    for (const ObservedOp& o : observed) o.hostEnded(requests, status, {});
    return status;
  };
  for (Request& r : requests) {
    if (r.isP2p) {
      p2pOf[r.comm].push_back(&r);
      continue;
    }
    // Collectives spread over lanes 1..lanes-1 so several progress at once.
    int i = collIndex[r.comm]++;
    int lane = 1 + i % (r.comm->config.lanes - 1);
    Prepared p;
    if (Status s = prepareCollective(r, lane, &p); !s) return fail(s);
    prepared.push_back(std::move(p));
  }
  for (auto& [comm, reqs] : p2pOf) {
    Prepared p;
    if (Status s = prepareP2p(comm, reqs, &p); !s) return fail(s);
    prepared.push_back(std::move(p));
  }
  for (lanesComm* comm : comms)
    if (Status s = comm->checkAbort(); !s) return fail(s);
  // What each communicator runs now, for peers' progress queries.
  // (By position in `comms`: a vector, so a small call allocates little.)
  std::vector<HangInfo> hangs(comms.size());
  auto hangOf = [&](lanesComm* comm) -> HangInfo& {
    return hangs[static_cast<size_t>(std::find(comms.begin(), comms.end(), comm) - comms.begin())];
  };
  for (size_t i = 0; i < comms.size(); ++i) hangs[i].ops = 0;
  for (Request& r : requests) {
    HangInfo& h = hangOf(r.comm);
    if (h.ops++ == 0) h.op = signatureOf(r);
  }
  for (size_t i = 0; i < comms.size(); ++i) {
    hangs[i].seq = static_cast<int64_t>(comms[i]->seq++);
    comms[i]->watch.progress.begin(hangs[i].seq, hangs[i].op, hangs[i].ops);
    if (!observed.empty()) {
      observed[i].setSeq(hangs[i].seq);
      observed[i].planned();
      observed[i].started();
    }
  }
  bool countWaits = false;
  for (lanesComm* comm : comms) countWaits = countWaits || comm->metrics != nullptr;

  double timeout = 0;
  for (lanesComm* comm : comms) timeout = std::max(timeout, comm->options.timeoutSeconds);
  std::vector<ExecWork> work;
  for (Prepared& p : prepared) {
    ExecWork w;
    w.schedule = p.schedule.get();
    w.lane = p.lane;
    w.connections = &p.comm->links.table;
    w.arena = p.comm->sumArena.get();
    w.rank = p.comm->rank;
    lanesComm* comm = p.comm;
    w.checkAbort = [comm] { return comm->checkAbort(); };
    w.peerStatus = [comm](int peer) { return comm->bootstrap->peerStatus(peer); };
    w.label = p.label;
    w.spinLimit = comm->spinLimit;
    work.push_back(std::move(w));
  }
  std::vector<int> waitingFor;
  uint64_t waitedNs = 0;
  NvtxRange running;  // the host engine's stage (the proxy's too)
  if (nvtxAttached()) {
    std::string what = "run";
    for (const Prepared& p : prepared) what += " " + p.schedule->name;
    running.push(what, prepared.size());
  }
  Status status =
      runWork(work, Deadline::after(timeout), &waitingFor, countWaits ? &waitedNs : nullptr);
  running.pop();
  for (size_t i = 0; i < comms.size(); ++i)
    comms[i]->watch.progress.end(hangs[i].seq, status.isOk());
  for (const ObservedOp& o : observed) o.countPeerWait(waitedNs);
  if (!status) {
    // Attribute the failure to the communicator whose op failed (the first, if unclear).
    lanesComm* failed = comms.front();
    for (Prepared& p : prepared)
      if (status.message().find(p.label) != std::string::npos) failed = p.comm;
    HangInfo& hang = hangOf(failed);
    hang.waitingFor = waitingFor;
    for (const ObservedOp& o : observed)
      o.hostEnded(requests, status,
                  o.comm() == failed ? std::span<const int>(waitingFor) : std::span<const int>());
    return explainFailure(failed, status, hang);
  }
  for (const ObservedOp& o : observed) {
    for (const Prepared& p : prepared)
      if (p.comm == o.comm()) o.countTraffic(*p.schedule);
    o.hostEnded(requests, status, {});
  }
  for (Request& r : requests) {
    if (r.isP2p || r.op.kind != RedOpKind::Avg) continue;
    size_t n = avgCount(r.args);
    if (n > 0) cpu::finishAvg(r.args.recv, n, r.args.type, r.args.nranks);
  }
  return Status::ok();
}

}  // namespace lanes
