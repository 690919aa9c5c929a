// Ring: reduce-scatter followed by all-gather around the ring's positions
// 0 -> 1 -> ... -> n-1 -> 0, where position p holds rank order[p]
// (algorithms/ring_order.h; rank p without an order).
//
// The whole collective is ONE step: ops stream, and the ops to `next` (and
// from `prev`) are carried in step order, so each segment's partial sum
// travels the ring while later segments follow it; no chunk loop is needed.
//
// Segments belong to ranks, not positions: the one a position owns is its
// rank's, so reduce-scatter and all-gather keep NCCL's layout (block r is
// rank r's) whatever the order. Write o(p) for the rank at position p (mod n)
// and v for this rank's position. Segment o(k)'s reduction starts at position
// k+1 and ends at its owner, position k, after n-1 hops; the owner's fully
// reduced segment is then forwarded n-1 hops (the all-gather). Position v
// therefore sends segments o(v-1), o(v-2), ..., o(v+1) (reduce-scatter), then
// o(v), o(v-1), ..., o(v+2) (all-gather), and receives the same sequence
// shifted by one. Every element is reduced by one chain and then copied, so
// all ranks hold bit-identical results.
#include "algorithms/schedule_builder.h"

namespace lanes::algo {
namespace {

// This rank's place in the ring.
struct RingPosition {
  std::span<const int> order;  // empty: the identity
  int n = 1;
  int pos = 0;  // this rank's position
  RingPosition(const CollArgs& a, std::span<const int> o) : order(o), n(a.nranks), pos(a.rank) {
    for (int p = 0; p < static_cast<int>(order.size()); ++p)
      if (order[p] == a.rank) pos = p;
  }
  // The rank at position pos + d (around the ring).
  int rankAt(int d) const {
    const int p = mod(pos + d, n);
    return order.empty() ? p : order[p];
  }
  int next() const { return rankAt(1); }
  int prev() const { return rankAt(-1); }
};

Status ringAllReduce(const CollArgs& a, std::span<const int> order, Schedule* out) {
  const size_t esz = datatypeSize(a.type);
  const int n = a.nranks, r = a.rank;
  if (n == 1) {
    localCopySchedule(a.send, a.recv, a.count * esz, out);
    return Status::ok();
  }
  if (a.count == 0) return Status::ok();
  const Segments seg{a.count, n};
  const RingPosition ring(a, order);
  const int next = ring.next(), prev = ring.prev();
  auto in = [&](int k) { return at(a.send, seg.offset(k) * esz); };
  // The recv buffer doubles as the accumulation space for partial sums: segment k's
  // partial is forwarded before segment k's final value can come back around the ring
  // to overwrite it, and in place dst == src element by element.
  auto outSeg = [&](int k) { return at(a.recv, seg.offset(k) * esz); };
  auto bytes = [&](int k) { return seg.size(k) * esz; };

  Step& st = out->addStep();
  int k = ring.rankAt(-1);
  addSend(st, next, in(k), bytes(k));
  for (int s = 1; s <= n - 2; ++s) {
    k = ring.rankAt(-1 - s);
    addRecvReduceSend(st, prev, next, outSeg(k), in(k), bytes(k));
  }
  // Own segment: the last contribution arrives; the result starts the all-gather.
  addRecvReduceSend(st, prev, next, outSeg(r), in(r), bytes(r));
  for (int t = 1; t <= n - 2; ++t) {
    k = ring.rankAt(-t);
    addRecvSend(st, prev, next, outSeg(k), bytes(k));
  }
  k = ring.rankAt(1);
  addRecv(st, prev, outSeg(k), bytes(k));
  return Status::ok();
}

// sendbuff holds n blocks of `count`; rank r ends with the reduction of block r.
Status ringReduceScatter(const CollArgs& a, std::span<const int> order, Schedule* out) {
  const size_t esz = datatypeSize(a.type);
  const size_t blk = a.count * esz;
  const int n = a.nranks, r = a.rank;
  if (n == 1) {
    localCopySchedule(a.send, a.recv, blk, out);
    return Status::ok();
  }
  if (blk == 0) return Status::ok();
  const RingPosition ring(a, order);
  const int next = ring.next(), prev = ring.prev();
  auto in = [&](int k) { return at(a.send, size_t(k) * blk); };
  // Partial sums of blocks this rank does not keep need their own space: the user's
  // input must stay intact and recvbuff holds one block only.
  std::byte* partial = n > 2 ? out->allocScratch(size_t(n - 2) * blk) : nullptr;

  Step& st = out->addStep();
  addSend(st, next, in(ring.rankAt(-1)), blk);
  for (int s = 1; s <= n - 2; ++s) {
    const int k = ring.rankAt(-1 - s);
    addRecvReduceSend(st, prev, next, partial + size_t(s - 1) * blk, in(k), blk);
  }
  addRecvReduce(st, prev, a.recv, in(r), blk);
  return Status::ok();
}

// Rank r's `count` elements land at block r of every rank's recvbuff.
Status ringAllGather(const CollArgs& a, std::span<const int> order, Schedule* out) {
  const size_t esz = datatypeSize(a.type);
  const size_t blk = a.count * esz;
  const int n = a.nranks, r = a.rank;
  if (blk == 0) return Status::ok();
  auto outBlk = [&](int k) { return at(a.recv, size_t(k) * blk); };
  Step& st = out->addStep();
  addCopy(st, outBlk(r), a.send, blk);  // nothing in place (send == block r)
  if (n == 1) return Status::ok();
  const RingPosition ring(a, order);
  const int next = ring.next(), prev = ring.prev();
  addSend(st, next, a.send, blk);
  for (int t = 1; t <= n - 2; ++t) addRecvSend(st, prev, next, outBlk(ring.rankAt(-t)), blk);
  addRecv(st, prev, outBlk(ring.rankAt(1)), blk);
  return Status::ok();
}

}  // namespace

Status buildRing(const CollArgs& args, std::span<const int> order, Schedule* out) {
  beginSchedule(args, "ring", out);
  switch (args.coll) {
    case CollType::AllReduce:
      return ringAllReduce(args, order, out);
    case CollType::ReduceScatter:
      return ringReduceScatter(args, order, out);
    case CollType::AllGather:
      return ringAllGather(args, order, out);
    default:
      break;
  }
  return invalidUsage(std::string("the ring algorithm does not implement ") +
                      collTypeName(args.coll) + "; choose another algorithm.");
}

}  // namespace lanes::algo
