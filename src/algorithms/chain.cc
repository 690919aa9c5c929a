// Chain: a pipelined line through the ranks starting (broadcast) or ending
// (reduce) at the root. One step per rank; the streaming ops forward each
// piece as it arrives, so the chain costs one message time plus n-1 pieces.
//
// Positions count from the root: pos = (rank - root) mod n. Broadcast flows
// pos 0 -> 1 -> ... -> n-1; reduce flows n-1 -> ... -> 1 -> 0.
#include "algorithms/schedule_builder.h"

namespace lanes::algo {
namespace {

// This rank's place in the line. Both chains run between the same two
// neighbours, in opposite directions.
struct Link {
  size_t bytes = 0;
  int pos = 0;   // from the root
  int last = 0;  // the far end's pos
  int up = 0;    // the rank one position nearer the root
  int down = 0;  // the rank one position farther from it
};

void chainBroadcast(const CollArgs& a, const Link& l, Step& st) {
  if (l.pos == 0) {
    addSend(st, l.down, a.send, l.bytes);
    addCopy(st, a.recv, a.send, l.bytes);  // nothing in place
  } else if (l.pos < l.last) {
    addRecvSend(st, l.up, l.down, a.recv, l.bytes);
  } else {
    addRecv(st, l.up, a.recv, l.bytes);
  }
}

void chainReduce(const CollArgs& a, const Link& l, Step& st, Schedule* out) {
  if (l.pos == l.last) {
    addSend(st, l.up, a.send, l.bytes);
  } else if (l.pos > 0) {
    // recvbuff is significant only at the root (NCCL), so partial sums need scratch.
    addRecvReduceSend(st, l.down, l.up, out->allocScratch(l.bytes), a.send, l.bytes);
  } else {
    addRecvReduce(st, l.down, a.recv, a.send, l.bytes);
  }
}

}  // namespace

Status buildChain(const CollArgs& args, Schedule* out) {
  beginSchedule(args, "chain", out);
  if (args.coll != CollType::Broadcast && args.coll != CollType::Reduce)
    return invalidUsage(std::string("the chain algorithm does not implement ") +
                        collTypeName(args.coll) + "; choose another algorithm.");
  const size_t bytes = args.count * datatypeSize(args.type);
  const int n = args.nranks, r = args.rank;
  if (bytes == 0) return Status::ok();
  if (n == 1) {
    localCopySchedule(args.send, args.recv, bytes, out);
    return Status::ok();
  }
  const Link link{bytes, mod(r - args.root, n), n - 1, mod(r - 1, n), mod(r + 1, n)};
  Step& st = out->addStep();
  if (args.coll == CollType::Broadcast)
    chainBroadcast(args, link, st);
  else
    chainReduce(args, link, st, out);
  return Status::ok();
}

}  // namespace lanes::algo
