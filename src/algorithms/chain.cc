// Chain: a pipelined line through the ranks starting (broadcast) or ending
// (reduce) at the root. One step per rank; the streaming ops forward each
// piece as it arrives, so the chain costs one message time plus n-1 pieces.
//
// Positions count from the root: pos = (rank - root) mod n. Broadcast flows
// pos 0 -> 1 -> ... -> n-1; reduce flows n-1 -> ... -> 1 -> 0.
#include "algorithms/schedule_builder.h"

namespace lanes::algo {
namespace {

Status chainBroadcast(const CollArgs& a, Schedule* out) {
  const size_t bytes = a.count * datatypeSize(a.type);
  const int n = a.nranks, r = a.rank;
  const int pos = mod(r - a.root, n);
  if (bytes == 0) return Status::ok();
  if (n == 1) {
    localCopySchedule(a.send, a.recv, bytes, out);
    return Status::ok();
  }
  const int next = mod(r + 1, n), prev = mod(r - 1, n);
  Step& st = out->addStep();
  if (pos == 0) {
    addSend(st, next, a.send, bytes);
    addCopy(st, a.recv, a.send, bytes);  // nothing in place
  } else if (pos < n - 1) {
    addRecvSend(st, prev, next, a.recv, bytes);
  } else {
    addRecv(st, prev, a.recv, bytes);
  }
  return Status::ok();
}

Status chainReduce(const CollArgs& a, Schedule* out) {
  const size_t bytes = a.count * datatypeSize(a.type);
  const int n = a.nranks, r = a.rank;
  const int pos = mod(r - a.root, n);
  if (bytes == 0) return Status::ok();
  if (n == 1) {
    localCopySchedule(a.send, a.recv, bytes, out);
    return Status::ok();
  }
  const int from = mod(r + 1, n), to = mod(r - 1, n);
  Step& st = out->addStep();
  if (pos == n - 1) {
    addSend(st, to, a.send, bytes);
  } else if (pos > 0) {
    // recvbuff is significant only at the root (NCCL), so partial sums need scratch.
    addRecvReduceSend(st, from, to, out->allocScratch(bytes), a.send, bytes);
  } else {
    addRecvReduce(st, from, a.recv, a.send, bytes);
  }
  return Status::ok();
}

}  // namespace

Status buildChain(const CollArgs& args, Schedule* out) {
  beginSchedule(args, "chain", out);
  switch (args.coll) {
    case CollType::Broadcast:
      return chainBroadcast(args, out);
    case CollType::Reduce:
      return chainReduce(args, out);
    default:
      break;
  }
  return invalidUsage(std::string("the chain algorithm does not implement ") +
                      collTypeName(args.coll) + "; choose another algorithm.");
}

}  // namespace lanes::algo
