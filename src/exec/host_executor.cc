#include "exec/host_executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "base/log.h"
#include "exec/arena_sum.h"
#include "kernels/cpu/reduce.h"
#include "transport/common/byte_ring.h"

namespace lanes {
namespace {

bool hasRecv(OpKind k) {
  return k == OpKind::Recv || k == OpKind::RecvReduce || k == OpKind::RecvSend ||
         k == OpKind::RecvReduceSend;
}
bool hasSend(OpKind k) {
  return k == OpKind::Send || k == OpKind::RecvSend || k == OpKind::RecvReduceSend;
}
bool isForward(OpKind k) { return k == OpKind::RecvSend || k == OpKind::RecvReduceSend; }
bool isArena(OpKind k) { return k == OpKind::ArenaAllReduce || k == OpKind::ArenaReduceScatter; }
bool isReduce(OpKind k) { return k == OpKind::RecvReduce || k == OpKind::RecvReduceSend; }

// Progress of one op. Byte counts on the wire are padded to the ring granule.
struct OpState {
  const Op* op = nullptr;
  size_t padded = 0;
  size_t received = 0;  // payload bytes received and processed
  size_t recvWire = 0;  // wire bytes consumed
  size_t sentWire = 0;  // wire bytes posted
  // A compressed wire (Schedule::wire): the op's frames before padding, the
  // frames to send as they are made, and a frame that arrived in pieces.
  size_t wirePayload = 0;
  std::byte* stage = nullptr;  // the schedule's scratch, wirePayload bytes
  size_t staged = 0;           // bytes of `stage` ready to post
  size_t encoded = 0;          // a send's source values encoded into `stage`
  size_t framesWire = 0;       // wire bytes of the whole frames received
  std::vector<std::byte> carry;
  size_t carried = 0;
  bool recvDone() const { return !hasRecv(op->kind) || recvWire == padded; }
  bool sendDone() const { return !hasSend(op->kind) || sentWire == padded; }
};

// Ops of one step bound for (or coming from) one peer, FIFO as in the step.
struct PeerQueue {
  int peer = -1;
  std::vector<size_t> ops;  // indices into StepState::ops
  size_t head = 0;
};

// The ops of one step, queued per peer in each direction. Steps are small
// (a handful of peers), so flat vectors beat maps; their capacity is reused
// from step to step so a small collective allocates nothing here.
struct StepState {
  std::vector<OpState> ops;
  std::vector<PeerQueue> sendQueue;
  std::vector<PeerQueue> recvQueue;
  std::vector<ArenaSum> arenaSums;  // the step's Arena* ops, not yet done
  size_t remaining = 0;
};

PeerQueue& queueFor(std::vector<PeerQueue>& queues, int peer) {
  for (PeerQueue& q : queues)
    if (q.peer == peer) return q;
  queues.emplace_back();
  queues.back().peer = peer;
  return queues.back();
}

// One chain of work items that share a (connections, lane) stream.
struct Track {
  std::vector<ExecWork*> items;
  size_t item = 0;
  size_t step = 0;
  bool stepLoaded = false;
  StepState state;
  bool done() const { return item >= items.size(); }
};

// A send's frames are made as the port drains: up to two commits ahead of
// what it took, so encoding overlaps the transfer.
void encodeSendAhead(const WireCodec& codec, OpState* st) {
  const auto* src = static_cast<const float*>(st->op->src);
  const size_t elems = st->op->bytes / sizeof(float);
  while (st->encoded < elems && st->staged < st->sentWire + 2 * kRingCommitBytes) {
    const size_t n = std::min(codec.frameElems(), elems - st->encoded);
    codec.encode(src + st->encoded, n, st->stage + st->staged);
    st->encoded += n;
    st->staged += codec.frameBytes(n);
  }
}

void loadStep(Schedule& sched, const Step& step, StepState* s) {
  const WireFormat wire = sched.wire;
  s->ops.clear();
  s->sendQueue.clear();
  s->recvQueue.clear();
  s->remaining = 0;
  const WireCodec codec(wire);
  for (const Op& op : step.ops) {
    OpState st;
    st.op = &op;
    st.padded = padToGranule(op.bytes);
    if (wire != WireFormat::Native && op.kind != OpKind::Copy) {
      st.wirePayload = codec.wireBytes(op.bytes / sizeof(float));
      st.padded = padToGranule(st.wirePayload);
      // Scratch from the communicator's pool: no page faults call after call.
      if (hasSend(op.kind) && st.wirePayload > 0) st.stage = sched.allocScratch(st.wirePayload);
      if (hasRecv(op.kind)) st.carry.resize(WireCodec::kMaxFrameBytes);
    }
    s->ops.push_back(std::move(st));
  }
  // Local copies first: transfers of the step may read what they produce.
  for (OpState& st : s->ops) {
    if (st.op->kind == OpKind::Copy && st.op->bytes > 0 && st.op->dst != st.op->src)
      std::memmove(st.op->dst, st.op->src, st.op->bytes);
  }
  s->arenaSums.clear();
  const size_t elem = std::max<size_t>(1, datatypeSize(sched.type));
  uint32_t chunk = sched.arenaFirstChunk;
  for (const Op& op : step.ops) {
    if (!isArena(op.kind) || op.bytes == 0) continue;
    const bool scatter = op.kind == OpKind::ArenaReduceScatter;
    s->arenaSums.emplace_back(scatter, op.src, op.dst, op.bytes / elem, sched.type, sched.redop,
                              sched.nranks, chunk);
    chunk += ArenaSum::chunksFor(scatter, op.bytes / elem, elem, sched.nranks);
    ++s->remaining;
  }
  for (size_t i = 0; i < s->ops.size(); ++i) {
    const Op& op = *s->ops[i].op;
    if (op.kind == OpKind::Copy || isArena(op.kind) || op.bytes == 0) continue;
    const bool sends = hasSend(op.kind), receives = hasRecv(op.kind);
    if (sends) queueFor(s->sendQueue, op.sendPeer).ops.push_back(i);
    if (receives) queueFor(s->recvQueue, op.recvPeer).ops.push_back(i);
    if (sends || receives) ++s->remaining;
  }
}

std::string describe(const ExecWork& w) {
  return w.label.empty() ? w.schedule->name : w.label + " (" + w.schedule->name + ")";
}

Status missingConnection(const ExecWork& w, int peer) {
  return internalError(describe(w) + " on rank " + std::to_string(w.rank) +
                       " needs a connection to rank " + std::to_string(peer) +
                       " that this communicator does not have; this is a bug in Lanes");
}

// Advances one direction of a step, each peer's queue head first: ops to one
// peer share a FIFO port, so an op waits for the one ahead of it. `move(conn,
// st, &through)` moves what the port allows for one op and says whether the
// op is through in this direction; the step counts an op done once both of
// its directions are.
template <typename Move>
Status advanceQueues(const ExecWork& w, StepState& s, std::vector<PeerQueue>& queues, Move move) {
  const ConnectionTable& conns = *w.connections;
  for (PeerQueue& q : queues) {
    while (q.head < q.ops.size()) {
      OpState& st = s.ops[q.ops[q.head]];
      if (q.peer < 0 || q.peer >= static_cast<int>(conns.size()) || conns[q.peer] == nullptr)
        return missingConnection(w, q.peer);
      bool through = false;
      Status status = move(*conns[q.peer], st, &through);
      if (!status) return status;
      if (!through) break;
      if (st.recvDone() && st.sendDone()) --s.remaining;
      ++q.head;
    }
  }
  return Status::ok();
}

// One frame of a compressed wire arrived whole: decode it (a reduce adds it
// to the local values), and stage what a forwarding op sends on. A forwarded
// sum is rounded to the wire format in place (encoded, then decoded back), so
// the rank keeps exactly what its successors will decode; a forwarded copy
// passes the frame on as it came.
void takeFrame(const WireCodec& codec, const std::byte* frame, size_t elems, OpState& st) {
  const Op& op = *st.op;
  const size_t done = st.received / sizeof(float);
  float* dst = op.dst != nullptr ? static_cast<float*>(op.dst) + done : nullptr;
  const size_t bytes = codec.frameBytes(elems);
  if (isReduce(op.kind)) {
    codec.decode(frame, elems, static_cast<const float*>(op.src) + done, dst);
    if (isForward(op.kind)) {
      codec.encode(dst, elems, st.stage + st.staged);
      codec.decode(st.stage + st.staged, elems, nullptr, dst);
      st.staged += bytes;
    }
  } else {
    if (dst != nullptr) codec.decode(frame, elems, nullptr, dst);
    if (isForward(op.kind)) {
      std::memcpy(st.stage + st.staged, frame, bytes);
      st.staged += bytes;
    }
  }
  st.received += elems * sizeof(float);
  st.framesWire += bytes;
}

// Receives a compressed wire's frames: whole frames straight from the port's
// view, a frame split by the view's end through `carry`; then the padding.
Status receiveFrames(const WireCodec& codec, RecvPort& port, OpState& st, bool* progressed,
                     bool* through) {
  std::span<const std::byte> view;
  LANES_RETURN_IF_ERROR(port.peek(&view));
  const size_t budget = std::min({view.size(), st.padded - st.recvWire, kRingCommitBytes});
  const size_t elems = st.op->bytes / sizeof(float);
  size_t used = 0;
  while (used < budget && st.framesWire < st.wirePayload) {
    const size_t n = std::min(codec.frameElems(), elems - st.received / sizeof(float));
    const size_t need = codec.frameBytes(n);
    if (st.carried == 0 && budget - used >= need) {
      takeFrame(codec, view.data() + used, n, st);
      used += need;
      continue;
    }
    const size_t piece = std::min(need - st.carried, budget - used);
    std::memcpy(st.carry.data() + st.carried, view.data() + used, piece);
    st.carried += piece;
    used += piece;
    if (st.carried < need) break;
    st.carried = 0;
    takeFrame(codec, st.carry.data(), n, st);
  }
  if (st.framesWire == st.wirePayload)
    used += std::min(budget - used, st.padded - st.recvWire - used);
  if (used == 0) return Status::ok();
  port.consume(used);
  st.recvWire += used;
  *progressed = true;
  *through = st.recvWire == st.padded;
  return Status::ok();
}

// Moves as many bytes as the ports allow for one step. Sets *progressed.
Status progressStep(ExecWork& w, StepState& s, bool* progressed) {
  const Schedule& sched = *w.schedule;
  if (!s.arenaSums.empty() && w.arena == nullptr)
    return internalError("a host-summation schedule ran without the communicator's arena");
  for (ArenaSum& sum : s.arenaSums) {
    if (sum.done()) continue;
    sum.progress(*w.arena, w.rank, progressed);
    if (sum.done()) --s.remaining;
  }
  const size_t elem = std::max<size_t>(1, datatypeSize(sched.type));
  const bool compressed = sched.wire != WireFormat::Native;
  const WireCodec codec(sched.wire);

  Status status =
      advanceQueues(w, s, s.recvQueue, [&](Connection& conn, OpState& st, bool* through) {
        RecvPort& port = conn.recvPort(w.lane);
        if (compressed) return receiveFrames(codec, port, st, progressed, through);
        std::span<const std::byte> view;
        Status peeked = port.peek(&view);
        if (!peeked) return peeked;
        // Work in pieces so the sender gets slots back while we reduce the rest.
        size_t wire = std::min({view.size(), st.padded - st.recvWire, kRingCommitBytes});
        if (wire == 0) return Status::ok();
        size_t payload = std::min(wire, st.op->bytes - st.received);
        const Op& op = *st.op;
        if (payload > 0) {
          auto* dst = static_cast<std::byte*>(op.dst) + st.received;
          if (isReduce(op.kind)) {
            const auto* local = static_cast<const std::byte*>(op.src) + st.received;
            cpu::reduce(dst, local, view.data(), payload / elem, sched.type, sched.redop);
          } else if (op.dst != nullptr) {
            std::memcpy(dst, view.data(), payload);
          }
        }
        port.consume(wire);
        st.received += payload;
        st.recvWire += wire;
        *progressed = true;
        *through = st.recvWire == st.padded;
        return Status::ok();
      });
  if (!status) return status;

  return advanceQueues(w, s, s.sendQueue, [&](Connection& conn, OpState& st, bool* through) {
    SendPort& port = conn.sendPort(w.lane);
    const Op& op = *st.op;
    if (compressed && op.kind == OpKind::Send) encodeSendAhead(codec, &st);
    // What goes out: the op's bytes as they are, or its frames as staged.
    const auto* base =
        compressed ? st.stage : static_cast<const std::byte*>(isForward(op.kind) ? op.dst : op.src);
    const size_t total = compressed ? st.wirePayload : op.bytes;
    size_t ready = compressed ? st.staged : isForward(op.kind) ? st.received : op.bytes;
    size_t alignedReady = ready & ~(kRingGranule - 1);
    if (st.sentWire < alignedReady) {
      size_t taken = 0;
      Status posted = port.post(base + st.sentWire, alignedReady - st.sentWire, &taken);
      if (!posted) return posted;
      if (taken > 0) *progressed = true;
      st.sentWire += taken;
    }
    // The ragged tail crosses the wire padded to a full granule.
    if (st.sentWire == alignedReady && ready == total && st.sentWire < st.padded) {
      std::byte tail[kRingGranule] = {};
      std::memcpy(tail, base + st.sentWire, total - st.sentWire);
      size_t taken = 0;
      Status posted = port.post(tail, kRingGranule, &taken);
      if (!posted) return posted;
      if (taken == kRingGranule) {
        st.sentWire += kRingGranule;
        *progressed = true;
      }
    }
    *through = st.sentWire == st.padded;
    return Status::ok();
  });
}

// Names what a stuck step still waits for, for the timeout message; adds
// the peers an arena op waits for to *peers.
std::string pendingDescription(const ExecWork& w, const StepState& s, std::vector<int>* peers) {
  std::string out;
  for (const ArenaSum& sum : s.arenaSums)
    if (!sum.done() && w.arena != nullptr)
      out += (out.empty() ? "" : "; ") + sum.waiting(*w.arena, w.rank, peers);
  for (const PeerQueue& q : s.recvQueue) {
    if (q.head >= q.ops.size()) continue;
    const OpState& st = s.ops[q.ops[q.head]];
    out += (out.empty() ? "" : "; ") + std::string("receiving from rank ") +
           std::to_string(q.peer) + " (" + std::to_string(st.received) + " of " +
           std::to_string(st.op->bytes) + " bytes arrived)";
  }
  for (const PeerQueue& q : s.sendQueue) {
    if (q.head >= q.ops.size()) continue;
    const OpState& st = s.ops[q.ops[q.head]];
    out += (out.empty() ? "" : "; ") + std::string("sending to rank ") + std::to_string(q.peer) +
           " (" + std::to_string(std::min(st.sentWire, st.op->bytes)) + " of " +
           std::to_string(st.op->bytes) + " bytes taken)";
  }
  return out.empty() ? "nothing (it was about to finish)" : out;
}

// Adds the peers a stuck step still waits on (either direction) to *out.
void pendingPeers(const ExecWork& w, const StepState& s, std::vector<int>* out) {
  for (const ArenaSum& sum : s.arenaSums)
    if (!sum.done() && w.arena != nullptr) (void)sum.waiting(*w.arena, w.rank, out);
  for (const auto* queues : {&s.recvQueue, &s.sendQueue})
    for (const PeerQueue& q : *queues)
      if (q.head < q.ops.size() && std::find(out->begin(), out->end(), q.peer) == out->end())
        out->push_back(q.peer);
}

// The shared arena's waits end only by a peer's counter: a peer that left
// or died while this rank waits on it fails the op here, naming it (a
// transport's closed connection does that for the other ops). A peer that
// finished its part and then left is not one: once it is known gone its
// counters are final, so the wait is read again before it counts.
Status arenaPeersAlive(const ExecWork& w, const StepState& s) {
  if (!w.peerStatus || w.arena == nullptr) return Status::ok();
  for (const ArenaSum& sum : s.arenaSums) {
    if (sum.done()) continue;
    std::vector<int> peers;
    (void)sum.waiting(*w.arena, w.rank, &peers);
    for (int p : peers) {
      if (p == w.rank) continue;
      Status st = w.peerStatus(p);
      if (st) continue;
      std::vector<int> still;
      const std::string what = sum.waiting(*w.arena, w.rank, &still);
      if (std::find(still.begin(), still.end(), p) == still.end()) continue;
      return Status(st.code(), describe(w) + " failed on rank " + std::to_string(w.rank) + " in " +
                                   what + ": " + st.message());
    }
  }
  return Status::ok();
}

// Adds up the stretches the engine had nothing to move (waits for peers).
// The clock is read only where the caller counts them, and only for a wait
// that lasted kIdlePasses idle passes (about a microsecond): the short gaps
// of a small call between a post and its peer's answer would cost more
// clock reads than they hold time, and a straggler's waits are long.
class WaitClock {
 public:
  explicit WaitClock(uint64_t* total) : total_(total) {}
  ~WaitClock() { resume(); }  // a run that ends while waiting (timeout, failure)
  void idle() {
    if (total_ == nullptr || ++passes_ != kIdlePasses) return;
    since_ = Clock::now();
  }
  void resume() {
    if (passes_ >= kIdlePasses)
      *total_ += static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - since_).count());
    passes_ = 0;
  }

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr unsigned kIdlePasses = 32;
  uint64_t* total_;
  unsigned passes_ = 0;
  Clock::time_point since_{};
};

}  // namespace

Status runWork(std::span<ExecWork> work, Deadline deadline, std::vector<int>* waitingFor,
               uint64_t* waitedNs) {
  // Group items into tracks by their (connections, lane) stream.
  std::vector<Track> tracks;
  for (ExecWork& w : work) {
    auto it = std::find_if(tracks.begin(), tracks.end(), [&](const Track& t) {
      return t.items[0]->connections == w.connections && t.items[0]->lane == w.lane;
    });
    if (it == tracks.end()) {
      tracks.emplace_back();
      it = tracks.end() - 1;
    }
    it->items.push_back(&w);
  }

  unsigned spinLimit = 0;
  for (const ExecWork& w : work) spinLimit = std::max(spinLimit, w.spinLimit);
  Backoff backoff(spinLimit);
  unsigned iteration = 0;
  WaitClock waits(waitedNs);
  for (;;) {
    bool allDone = true;
    bool progressed = false;
    for (Track& t : tracks) {
      while (!t.done()) {
        ExecWork& w = *t.items[t.item];
        if (t.step >= w.schedule->steps.size()) {
          ++t.item;
          t.step = 0;
          t.stepLoaded = false;
          continue;
        }
        if (!t.stepLoaded) {
          loadStep(*w.schedule, w.schedule->steps[t.step], &t.state);
          t.stepLoaded = true;
          progressed = true;
        }
        Status status = progressStep(w, t.state, &progressed);
        if (!status) {
          return Status(status.code(), describe(w) + " failed on rank " + std::to_string(w.rank) +
                                           ": " + status.message());
        }
        if (t.state.remaining > 0) break;
        ++t.step;
        t.stepLoaded = false;
      }
      if (!t.done()) allDone = false;
    }
    if (allDone) return Status::ok();
    if (progressed) {
      waits.resume();
      backoff.reset();
      continue;
    }
    waits.idle();
    if ((++iteration & 15) == 0) {
      for (Track& t : tracks) {
        if (t.done()) continue;
        ExecWork& w = *t.items[t.item];
        if (w.checkAbort) {
          Status status = w.checkAbort();
          if (!status) return status;
        }
        if (Status gone = arenaPeersAlive(w, t.state); !gone) return gone;
      }
      if (deadline.expired()) {
        for (Track& t : tracks) {
          if (t.done()) continue;
          ExecWork& w = *t.items[t.item];
          if (waitingFor != nullptr) {
            // Every stuck stream of the same communicator (its lanes).
            for (const Track& u : tracks)
              if (!u.done() && u.items[0]->connections == w.connections)
                pendingPeers(*u.items[u.item], u.state, waitingFor);
          }
          std::vector<int> ignored;
          return timeoutError(describe(w) + " timed out on rank " + std::to_string(w.rank) +
                              " at step " + std::to_string(t.step) + ": still " +
                              pendingDescription(w, t.state, &ignored) +
                              ". Check that every rank calls the same collectives in the same "
                              "order with matching counts; LANES_TIMEOUT sets the limit.");
        }
      }
    }
    backoff.pause();
  }
}

Status runSchedules(std::span<const LaneSchedule> schedules, const ConnectionTable& connections,
                    const ExecContext& ctx) {
  std::vector<ExecWork> work;
  work.reserve(schedules.size());
  for (const LaneSchedule& ls : schedules) {
    ExecWork w;
    w.schedule = ls.schedule;
    w.lane = ls.lane;
    w.connections = &connections;
    w.rank = ctx.rank;
    w.checkAbort = ctx.checkAbort;
    w.label = ctx.opLabel;
    work.push_back(std::move(w));
  }
  return runWork(work, ctx.deadline);
}

const char* opKindName(OpKind k) {
  switch (k) {
    case OpKind::Send:
      return "send";
    case OpKind::Recv:
      return "recv";
    case OpKind::RecvReduce:
      return "recv-reduce";
    case OpKind::RecvSend:
      return "recv-send";
    case OpKind::RecvReduceSend:
      return "recv-reduce-send";
    case OpKind::Copy:
      return "copy";
    case OpKind::ArenaAllReduce:
      return "arena-all-reduce";
    case OpKind::ArenaReduceScatter:
      return "arena-reduce-scatter";
  }
  return "unknown";
}

}  // namespace lanes
