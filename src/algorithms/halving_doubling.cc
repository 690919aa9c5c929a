// Halving-doubling (Rabenseifner): a reduce-scatter by recursive halving,
// then, for an all-reduce, an all-gather by recursive doubling. A ring's
// bytes in 2 log2(p) rounds instead of 2(n-1) steps: in round k of the
// halving, rank r and r ^ (p >> (k+1)) each send the half of their range the
// other keeps and reduce the half they keep, so after log2(p) rounds rank r
// holds segment r fully reduced; the doubling rounds then swap whole ranges
// the other way. Each round is one exchange between a pair of ranks, so
// pairs progress without waiting for the rest, which is what rings of ranks
// that share cores lack.
//
// All-reduce on n ranks that are not a power of two folds the extra ranks in
// as recursive doubling does: rank p+i sends its input to rank i, which
// reduces it into its own first and sends it the result at the end.
// Reduce-scatter needs a power of two (algoSupports says so).
//
// Bit-identical results: every element is reduced once, by a tree of
// log2(p) levels ending at the rank that owns its segment, and then copied
// to the others.
#include "algorithms/schedule_builder.h"

namespace lanes::algo {
namespace {

// The segments [lo, lo + len) of a buffer cut into equal parts.
struct SegmentRange {
  int lo = 0, len = 0;
};

// The byte layout of `parts` segments of `count` elements of `esz` bytes.
struct Layout {
  Segments seg;
  size_t esz;
  size_t offset(int part) const { return seg.offset(part) * esz; }
  size_t bytes(SegmentRange r) const { return offset(r.lo + r.len) - offset(r.lo); }
};

// Round `d` of the halving: the half of `held` this rank keeps and the half
// it gives to its partner r ^ d.
std::pair<SegmentRange, SegmentRange> halve(SegmentRange held, int rank, int d) {
  const int half = held.len / 2;
  const SegmentRange lower{held.lo, half}, upper{held.lo + half, half};
  return (rank & d) != 0 ? std::pair{upper, lower} : std::pair{lower, upper};
}

Status hdAllReduce(const CollArgs& a, Schedule* out) {
  const size_t esz = datatypeSize(a.type);
  const size_t bytes = a.count * esz;
  const int n = a.nranks, r = a.rank;
  if (n == 1) {
    localCopySchedule(a.send, a.recv, bytes, out);
    return Status::ok();
  }
  if (bytes == 0) return Status::ok();
  const int p = floorPow2(n);
  if (r >= p) {  // extra rank: hand the input over, collect the result
    addSend(out->addStep(), r - p, a.send, bytes);
    addRecv(out->addStep(), r - p, a.recv, bytes);
    return Status::ok();
  }
  const bool folds = r < n - p;
  const Layout lay{Segments{a.count, p}, esz};
  // recvbuff accumulates: a round's Send reads the half this rank gives away
  // while its RecvReduce writes the other half, and in place each element is
  // reduced onto itself.
  const void* cur = a.send;
  if (folds) {
    addRecvReduce(out->addStep(), r + p, a.recv, a.send, bytes);
    cur = a.recv;
  }
  SegmentRange held{0, p};
  for (int d = p / 2; d >= 1; d /= 2) {
    const auto [keep, give] = halve(held, r, d);
    Step& st = out->addStep();
    addSend(st, r ^ d, at(cur, lay.offset(give.lo)), lay.bytes(give));
    addRecvReduce(st, r ^ d, at(a.recv, lay.offset(keep.lo)), at(cur, lay.offset(keep.lo)),
                  lay.bytes(keep));
    held = keep;
    cur = a.recv;
  }
  // held is {r, 1}: rank r's segment. Ranges stay aligned to their length, so
  // the partner's is this one's with bit d flipped.
  for (int d = 1; d < p; d *= 2) {
    const SegmentRange theirs{held.lo ^ d, held.len};
    Step& st = out->addStep();
    addSend(st, r ^ d, at(a.recv, lay.offset(held.lo)), lay.bytes(held));
    addRecv(st, r ^ d, at(a.recv, lay.offset(theirs.lo)), lay.bytes(theirs));
    held = SegmentRange{std::min(held.lo, theirs.lo), 2 * held.len};
  }
  if (folds) addSend(out->addStep(), r + p, a.recv, bytes);
  return Status::ok();
}

// sendbuff holds n blocks of `count`; rank r ends with the reduction of
// block r. Partial sums live in scratch at their block's place within the
// first round's kept half (the input stays intact), the last round's in
// recvbuff.
Status hdReduceScatter(const CollArgs& a, Schedule* out) {
  const size_t esz = datatypeSize(a.type);
  const size_t blk = a.count * esz;
  const int n = a.nranks, r = a.rank;
  if (n == 1) {
    localCopySchedule(a.send, a.recv, blk, out);
    return Status::ok();
  }
  if (blk == 0) return Status::ok();
  std::byte* partial = n > 2 ? out->allocScratch(size_t(n / 2) * blk) : nullptr;
  int partialBase = 0;  // the block at partial's start: the first round's kept half
  const std::byte* cur = static_cast<const std::byte*>(a.send);
  int curBase = 0;  // the block at cur's start
  SegmentRange held{0, n};
  for (int d = n / 2; d >= 1; d /= 2) {
    const auto [keep, give] = halve(held, r, d);
    if (d == n / 2) partialBase = keep.lo;
    auto inCur = [&](int block) { return cur + size_t(block - curBase) * blk; };
    std::byte* dst =
        d == 1 ? static_cast<std::byte*>(a.recv) : partial + size_t(keep.lo - partialBase) * blk;
    Step& st = out->addStep();
    addSend(st, r ^ d, inCur(give.lo), size_t(give.len) * blk);
    addRecvReduce(st, r ^ d, dst, inCur(keep.lo), size_t(keep.len) * blk);
    cur = partial;
    curBase = partialBase;
    held = keep;
  }
  return Status::ok();
}

}  // namespace

Status buildHalvingDoubling(const CollArgs& args, Schedule* out) {
  beginSchedule(args, "halving_doubling", out);
  switch (args.coll) {
    case CollType::AllReduce:
      return hdAllReduce(args, out);
    case CollType::ReduceScatter:
      return hdReduceScatter(args, out);
    default:
      break;
  }
  return invalidUsage(std::string("the halving-doubling algorithm does not implement ") +
                      collTypeName(args.coll) + "; choose another algorithm.");
}

}  // namespace lanes::algo
