// Hierarchical collectives for ranks spread over hosts, L ranks on each of
// H hosts, so that only one step crosses the hosts' links (NCCL's and
// Horovod's hierarchical all-reduce):
//  - all-reduce: within each host a ring reduce-scatter leaves local rank i
//    with shard i of the host's sum; the ranks holding shard i on every host
//    all-reduce it in a ring across the hosts (all shards at once); within
//    each host a ring all-gather spreads the shards back. A host's link
//    carries 2(H-1)/H of the buffer, against 2(N-1)/N for a flat ring;
//  - all-gather: across the hosts, the ranks of local index i gather their
//    blocks; then within each host a ring all-gather moves each local rank's
//    H blocks to the others. A host's link carries (H-1)L blocks each way,
//    where a flat ring through it carries N-1;
//  - reduce-scatter: the reverse: within each host a ring reduce-scatter
//    leaves local rank i with the host's sum of the blocks of every host's
//    local rank i; across the hosts those ranks reduce-scatter them.
// Each step starts from the last one's finished result.
//
// Hosts come as each rank's host index (`hostOf`, the same on every rank);
// the ranks of a host keep rank order and the hosts go in the order of
// their first rank. Every host must hold the same number of ranks; without
// host indexes every rank is on one host. Every element is reduced by one
// chain and then copied, so all ranks hold bit-identical results.
#include <algorithm>
#include <functional>

#include "algorithms/schedule_builder.h"

namespace lanes::algo {
namespace {

// A ring over some of the ranks: `members` in ring order, this rank at `pos`.
// Segment k of the ring's region belongs to the member at position k.
struct GroupRing {
  std::vector<int> members;
  int pos = 0;
  int size() const { return static_cast<int>(members.size()); }
  int at(int d) const { return mod(pos + d, size()); }  // a position
  int next() const { return members[static_cast<size_t>(at(1))]; }
  int prev() const { return members[static_cast<size_t>(at(-1))]; }
};

// Part of a segment: `bytes` at byte offset `off` of the region's buffers.
struct Piece {
  size_t off = 0;
  size_t bytes = 0;
};

// What a ring moves: segment k's pieces (the same list, in the same order,
// on every rank, so the ops to one peer pair up) in `in`, summed or copied
// into `out` at the same offsets.
struct Region {
  const void* in = nullptr;
  void* out = nullptr;
  std::function<std::vector<Piece>(int)> segment;
};

// Contiguous segments: `parts` of `count` elements of `esz` bytes from `base`.
std::function<std::vector<Piece>(int)> contiguous(size_t base, size_t count, int parts,
                                                  size_t esz) {
  return [=](int k) {
    const Segments seg{count, parts};
    return std::vector<Piece>{{base + seg.offset(k) * esz, seg.size(k) * esz}};
  };
}

// Reduce-scatter around `ring`: position v ends with segment v reduced over
// the ring in `r.out`, or at `ownOut` (the pieces side by side) where given
// (the other segments' partial sums pass through `r.out`). `forwardOwn`:
// segment v's sum goes on to the next position as it is produced, which
// starts an all-gather (allGather with `ownSent`).
void reduceScatter(Step& st, const GroupRing& ring, const Region& r, bool forwardOwn = false,
                   std::byte* ownOut = nullptr) {
  const int n = ring.size();
  for (const Piece& p : r.segment(ring.at(-1))) addSend(st, ring.next(), at(r.in, p.off), p.bytes);
  for (int s = 1; s <= n - 2; ++s)
    for (const Piece& p : r.segment(ring.at(-1 - s)))
      addRecvReduceSend(st, ring.prev(), ring.next(), at(r.out, p.off), at(r.in, p.off), p.bytes);
  size_t placed = 0;
  for (const Piece& p : r.segment(ring.pos)) {
    std::byte* dst = ownOut != nullptr ? ownOut + placed : at(r.out, p.off);
    placed += p.bytes;
    if (forwardOwn)
      addRecvReduceSend(st, ring.prev(), ring.next(), dst, at(r.in, p.off), p.bytes);
    else
      addRecvReduce(st, ring.prev(), dst, at(r.in, p.off), p.bytes);
  }
}

// All-gather around `ring` of the segments each position holds in `r.out`
// (its own sent from `ownIn`, the pieces side by side, where given).
// `ownSent`: a reduce-scatter with `forwardOwn` sent it already.
void allGather(Step& st, const GroupRing& ring, const Region& r, bool ownSent = false,
               const std::byte* ownIn = nullptr) {
  const int n = ring.size();
  size_t placed = 0;
  for (const Piece& p : r.segment(ring.pos)) {
    if (!ownSent)
      addSend(st, ring.next(), ownIn != nullptr ? ownIn + placed : at(r.out, p.off), p.bytes);
    placed += p.bytes;
  }
  for (int t = 1; t <= n - 2; ++t)
    for (const Piece& p : r.segment(ring.at(-t)))
      addRecvSend(st, ring.prev(), ring.next(), at(r.out, p.off), p.bytes);
  for (const Piece& p : r.segment(ring.at(1))) addRecv(st, ring.prev(), at(r.out, p.off), p.bytes);
}

// Both in one step, streaming: a segment's sum goes on around the ring as
// soon as its owner has it.
void allReduce(Step& st, const GroupRing& ring, const Region& r) {
  reduceScatter(st, ring, r, true);
  allGather(st, ring, r, true);
}

}  // namespace
}  // namespace lanes::algo

namespace lanes {

Status hostGroups(std::span<const int> hostOf, int nranks, std::vector<std::vector<int>>* out) {
  out->clear();
  if (hostOf.empty()) {
    out->emplace_back();
    for (int r = 0; r < nranks; ++r) out->back().push_back(r);
    return Status::ok();
  }
  if (static_cast<int>(hostOf.size()) != nranks)
    return invalidArgument("host indexes for " + std::to_string(hostOf.size()) + " ranks, not " +
                           std::to_string(nranks));
  std::vector<int> seen;  // host index -> group
  for (int r = 0; r < nranks; ++r) {
    const int h = hostOf[static_cast<size_t>(r)];
    auto it = std::find(seen.begin(), seen.end(), h);
    if (it == seen.end()) {
      seen.push_back(h);
      out->emplace_back();
      it = seen.end() - 1;
    }
    (*out)[static_cast<size_t>(it - seen.begin())].push_back(r);
  }
  for (const std::vector<int>& g : *out)
    if (g.size() != out->front().size())
      return invalidUsage(
          "the hierarchical all-reduce needs the same number of ranks on every "
          "host; choose another algorithm (LANES_ALGO).");
  return Status::ok();
}

}  // namespace lanes

namespace lanes::algo {

Status buildHierarchical(const CollArgs& a, std::span<const int> hostOf, Schedule* out) {
  beginSchedule(a, "hierarchical", out);
  if (!algoSupports(AlgoId::Hierarchical, a.coll))
    return invalidUsage(std::string("the hierarchical algorithm does not implement ") +
                        collTypeName(a.coll) + "; choose another algorithm.");
  std::vector<std::vector<int>> groups;
  LANES_RETURN_IF_ERROR(hostGroups(hostOf, a.nranks, &groups));
  const size_t esz = datatypeSize(a.type);
  const size_t blk = a.count * esz;  // all-gather, reduce-scatter: one rank's block
  if (a.nranks == 1) {
    localCopySchedule(a.send, a.recv, blk, out);
    return Status::ok();
  }
  if (a.count == 0) return Status::ok();
  const int hosts = static_cast<int>(groups.size());
  const int local = static_cast<int>(groups.front().size());
  // This rank's host and its place there; the ranks of its local index.
  GroupRing within, across;
  for (const std::vector<int>& g : groups) {
    auto it = std::find(g.begin(), g.end(), a.rank);
    if (it == g.end()) continue;
    within.members = g;
    within.pos = static_cast<int>(it - g.begin());
  }
  for (const std::vector<int>& g : groups) across.members.push_back(g[within.pos]);
  across.pos = static_cast<int>(std::find(across.members.begin(), across.members.end(), a.rank) -
                                across.members.begin());
  // The blocks of one rank (across: the host's rank at this local index), or
  // of every host's rank at local index i (within), at rank order's offsets.
  auto blockOf = [&](int rank) { return Piece{static_cast<size_t>(rank) * blk, blk}; };
  auto acrossBlocks = [&, mine = within.pos](int h) {
    return std::vector<Piece>{blockOf(groups[static_cast<size_t>(h)][static_cast<size_t>(mine)])};
  };
  auto withinBlocks = [&](int i) {
    std::vector<Piece> pieces;
    for (const std::vector<int>& g : groups) pieces.push_back(blockOf(g[static_cast<size_t>(i)]));
    return pieces;
  };

  switch (a.coll) {
    case CollType::AllReduce: {
      const Region shards{a.send, a.recv, contiguous(0, a.count, local, esz)};
      if (local > 1) reduceScatter(out->addStep(), within, shards);
      if (hosts > 1) {
        // Shard `within.pos` across the hosts, in place in recv once the
        // host's sum is there (else straight from send).
        const Segments seg{a.count, local};
        allReduce(
            out->addStep(), across,
            Region{local > 1 ? a.recv : a.send, a.recv,
                   contiguous(seg.offset(within.pos) * esz, seg.size(within.pos), hosts, esz)});
      }
      if (local > 1) allGather(out->addStep(), within, shards);
      break;
    }
    case CollType::AllGather: {
      // Across the hosts first (this rank's block from send, into recv too),
      // then each local rank's H blocks within the host.
      Step& first = out->addStep();
      addCopy(first, at(a.recv, static_cast<size_t>(a.rank) * blk), a.send, blk);
      if (hosts > 1)
        allGather(first, across, Region{a.recv, a.recv, acrossBlocks}, false,
                  static_cast<const std::byte*>(a.send));
      if (local > 1) allGather(out->addStep(), within, Region{a.recv, a.recv, withinBlocks});
      break;
    }
    default: {  // reduce-scatter: send holds N blocks; this rank keeps its own, reduced
      // The host's partial sums of the blocks for every host's rank at this
      // local index, at rank order's offsets of a scratch as large as the input.
      std::byte* partial = out->allocScratch(static_cast<size_t>(a.nranks) * blk);
      auto* recv = static_cast<std::byte*>(a.recv);
      if (local > 1)
        reduceScatter(out->addStep(), within, Region{a.send, partial, withinBlocks}, false,
                      hosts > 1 ? nullptr : recv);
      if (hosts > 1)
        reduceScatter(
            out->addStep(), across,
            Region{local > 1 ? static_cast<const void*>(partial) : a.send, partial, acrossBlocks},
            false, recv);
      break;
    }
  }
  return Status::ok();
}

}  // namespace lanes::algo
