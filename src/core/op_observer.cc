#include "core/op_observer.h"

#include <algorithm>
#include <chrono>

#include "base/datatype.h"
#include "core/comm.h"
#include "exec/device_path.h"
#include "observe/nvtx_ranges.h"

namespace lanes {
namespace {

int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

FlightCall flightCallOf(const Request& r) {
  FlightCall c;
  if (r.isP2p) {
    c.name = r.isSend ? "send" : "recv";
    c.datatype = datatypeName(r.args.type);
    c.root = r.peer;
    c.count = r.args.count;
    return c;
  }
  c.name = collTypeName(r.args.coll);
  c.datatype = datatypeName(r.args.type);
  if (isReduction(r.args.coll)) c.redop = redOpName(r.op.kind);
  if (isRooted(r.args.coll)) c.root = r.args.root;
  c.count = r.args.count;
  return c;
}

size_t metricKindOf(const Request& r) {
  if (r.isP2p) return r.isSend ? kMetricSend : kMetricRecv;
  return static_cast<size_t>(r.args.coll);
}

}  // namespace

ObservedOp::ObservedOp(lanesComm* comm, std::span<const Request> requests) : comm_(comm) {
  const Request* first = nullptr;
  uint32_t calls = 0;
  for (const Request& r : requests) {
    if (r.comm != comm) continue;
    if (first == nullptr) first = &r;
    ++calls;
    bytes_ += r.sendBytes;
  }
  if (first == nullptr) return;
  call_ = flightCallOf(*first);
  calls_ = calls;
  id_ = comm->flight->begin(call_, calls, bytes_, first->onDevice);
  if (comm->metrics) beganNs_ = steadyNs();
}

void ObservedOp::planned() const {
  if (!nvtxAttached() || rangePushed_ || calls_ == 0) return;
  std::string message = std::string(call_.name) + " " + std::to_string(bytes_) + " B " +
                        call_.datatype + (call_.redop[0] ? " " : "") + call_.redop;
  if (calls_ > 1) message += " (+" + std::to_string(calls_ - 1) + " in group)";
  if (const std::optional<FlightEntry> e = comm_->flight->entry(id_); e && e->plan[0] != '\0')
    message += std::string(" on ") + e->plan.data();
  message += " · " + comm_->describe();
  rangePushed_ = nvtxPushRange(message.c_str(), bytes_);
}

void ObservedOp::trace() const {
  if (comm_->trace == nullptr) return;
  if (const std::optional<FlightEntry> e = comm_->flight->entry(id_)) comm_->trace->add(*e);
}

void ObservedOp::popRange() const {
  if (rangePushed_) nvtxPopRange();
  rangePushed_ = false;
}

void ObservedOp::setSeq(int64_t seq) const { comm_->flight->setSeq(id_, seq); }

// Read only for the trace's split of a call into planning and the engine's
// run: a clock read and a lock less per call otherwise.
void ObservedOp::started() const {
  if (comm_->trace) comm_->flight->started(id_);
}

void ObservedOp::countCalls(std::span<const Request> requests, bool onDevice) const {
  CommMetrics* m = comm_->metrics.get();
  if (m == nullptr || requests.empty()) return;
  const uint64_t ns = static_cast<uint64_t>(steadyNs() - beganNs_);
  // The group's time counts once, under its first call; every call counts.
  bool first = true;
  for (const Request& r : requests) {
    if (r.comm != comm_) continue;
    m->countCall(metricKindOf(r), r.args.type, onDevice, r.sendBytes, first ? ns : 0, first);
    first = false;
  }
}

void ObservedOp::hostEnded(std::span<const Request> requests, const Status& status,
                           std::span<const int> waitingFor) const {
  comm_->flight->finished(id_, status.isOk(), waitingFor);
  countCalls(requests, false);
  trace();
  popRange();
}

void ObservedOp::deviceEnqueued(std::span<const Request> requests, cudaStream_t stream,
                                const Status& status) const {
  if (!status) {
    comm_->flight->finished(id_, false);
  } else if (comm_->flight->on()) {
    const DeviceMarker m = markDeviceWork(comm_, stream);
    comm_->flight->enqueued(id_, m.marker, m.captured, reinterpret_cast<uint64_t>(stream));
  }
  countCalls(requests, true);
  trace();
  popRange();
}

void ObservedOp::countTraffic(const Schedule& schedule) const {
  CommMetrics* m = comm_->metrics.get();
  if (m == nullptr) return;
  const ConnectionTable& table = comm_->links.table;
  auto transportOf = [&](int peer) -> const char* {
    if (peer < 0 || static_cast<size_t>(peer) >= table.size() || table[peer] == nullptr)
      return nullptr;
    return table[peer]->transportName();
  };
  for (const Step& step : schedule.steps)
    for (const Op& op : step.ops) {
      // Host summation: the input goes into the shared arena, the output
      // (op.bytes) comes out of it; no connection carries either.
      if (op.kind == OpKind::ArenaAllReduce)
        m->countTransport("shm_arena", op.bytes, op.bytes);
      else if (op.kind == OpKind::ArenaReduceScatter)
        m->countTransport("shm_arena", op.bytes * static_cast<uint64_t>(schedule.nranks), op.bytes);
      if (const char* t = op.sendPeer >= 0 ? transportOf(op.sendPeer) : nullptr)
        m->countTransport(t, op.bytes, 0);
      if (const char* t = op.recvPeer >= 0 ? transportOf(op.recvPeer) : nullptr)
        m->countTransport(t, 0, op.bytes);
    }
}

void ObservedOp::countPeerWait(uint64_t ns) const {
  if (comm_->metrics) comm_->metrics->countPeerWait(ns);
}

void observeRefusedBatch(std::span<const Request> requests, const Status& status) {
  std::vector<lanesComm*> comms;
  for (const Request& r : requests)
    if (std::find(comms.begin(), comms.end(), r.comm) == comms.end()) comms.push_back(r.comm);
  for (lanesComm* comm : comms) ObservedOp(comm, requests).hostEnded(requests, status, {});
}

}  // namespace lanes
