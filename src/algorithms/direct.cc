// Direct: the root talks to every other rank itself, all in one step (gather,
// scatter, broadcast), or one peer per step where it accumulates (reduce,
// since concurrent RecvReduces into one buffer would race). Best for few
// ranks or small messages; the root's links carry everything.
#include "algorithms/schedule_builder.h"

namespace lanes::algo {
namespace {

// Block j of the root's recvbuff comes from rank j; in place, the root's
// sendbuff already is its block.
Status directGather(const CollArgs& a, Schedule* out) {
  const size_t blk = a.count * datatypeSize(a.type);
  if (blk == 0) return Status::ok();
  Step& st = out->addStep();
  if (a.rank != a.root) {
    addSend(st, a.root, a.send, blk);
    return Status::ok();
  }
  for (int j = 0; j < a.nranks; ++j) {
    if (j == a.root) {
      addCopy(st, at(a.recv, size_t(j) * blk), a.send, blk);
    } else {
      addRecv(st, j, at(a.recv, size_t(j) * blk), blk);
    }
  }
  return Status::ok();
}

// Block j of the root's sendbuff goes to rank j; in place, the root's recvbuff
// already is its block.
Status directScatter(const CollArgs& a, Schedule* out) {
  const size_t blk = a.count * datatypeSize(a.type);
  if (blk == 0) return Status::ok();
  Step& st = out->addStep();
  if (a.rank != a.root) {
    addRecv(st, a.root, a.recv, blk);
    return Status::ok();
  }
  for (int j = 0; j < a.nranks; ++j) {
    if (j == a.root) {
      addCopy(st, a.recv, at(a.send, size_t(j) * blk), blk);
    } else {
      addSend(st, j, at(a.send, size_t(j) * blk), blk);
    }
  }
  return Status::ok();
}

Status directBroadcast(const CollArgs& a, Schedule* out) {
  const size_t bytes = a.count * datatypeSize(a.type);
  if (bytes == 0) return Status::ok();
  Step& st = out->addStep();
  if (a.rank != a.root) {
    addRecv(st, a.root, a.recv, bytes);
    return Status::ok();
  }
  addCopy(st, a.recv, a.send, bytes);
  for (int j = 0; j < a.nranks; ++j) {
    if (j != a.root) addSend(st, j, a.send, bytes);
  }
  return Status::ok();
}

// Peers are folded in rank order, root+1, root+2, ...; the result lives only
// at the root, so the order needs no agreement with anyone.
Status directReduce(const CollArgs& a, Schedule* out) {
  const size_t bytes = a.count * datatypeSize(a.type);
  const int n = a.nranks;
  if (bytes == 0) return Status::ok();
  if (a.rank != a.root) {
    addSend(out->addStep(), a.root, a.send, bytes);
    return Status::ok();
  }
  if (n == 1) {
    localCopySchedule(a.send, a.recv, bytes, out);
    return Status::ok();
  }
  const void* acc = a.send;
  for (int k = 1; k < n; ++k) {
    addRecvReduce(out->addStep(), mod(a.root + k, n), a.recv, acc, bytes);
    acc = a.recv;
  }
  return Status::ok();
}

}  // namespace

Status buildDirect(const CollArgs& args, Schedule* out) {
  beginSchedule(args, "direct", out);
  switch (args.coll) {
    case CollType::Gather:
      return directGather(args, out);
    case CollType::Scatter:
      return directScatter(args, out);
    case CollType::Broadcast:
      return directBroadcast(args, out);
    case CollType::Reduce:
      return directReduce(args, out);
    default:
      break;
  }
  return invalidUsage(std::string("the direct algorithm does not implement ") +
                      collTypeName(args.coll) + "; choose another algorithm.");
}

}  // namespace lanes::algo
