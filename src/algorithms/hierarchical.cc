// Hierarchical all-reduce for ranks spread over hosts, L ranks on each of H
// hosts: within each host a ring reduce-scatter leaves local rank i with
// shard i of the host's sum; then, all shards at once, the ranks holding
// shard i on every host all-reduce it in a ring across the hosts; within
// each host a ring all-gather spreads the shards back. Each host's link
// carries 2(H-1)/H of the buffer, against 2(N-1)/N for a flat ring through
// it, and only the middle step crosses hosts (NCCL's and Horovod's
// hierarchical all-reduce). Three steps: each starts from the last one's
// finished result.
//
// Hosts come as each rank's host index (`hostOf`, the same on every rank);
// the ranks of a host keep rank order and the hosts go in the order of
// their first rank. Every host must hold the same number of ranks; without
// host indexes every rank is on one host, and the plan is a ring all-reduce
// in two steps. Every element is reduced by one chain and then copied, so
// all ranks hold bit-identical results.
#include <algorithm>

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

// The region's segments: `parts` of `count` elements at byte offset `base`.
struct Region {
  const void* in = nullptr;
  void* out = nullptr;
  size_t base = 0;  // bytes
  Segments seg;
  size_t esz = 1;
  const std::byte* src(int k) const { return at(in, base + seg.offset(k) * esz); }
  std::byte* dst(int k) const { return at(out, base + seg.offset(k) * esz); }
  size_t bytes(int k) const { return seg.size(k) * esz; }
};

// Reduce-scatter around `ring`: position v ends with segment v reduced over
// the ring in `r.out` (the other segments' partial sums pass through there
// too). `forwardOwn`: segment v's sum goes on to the next position as it is
// produced, which starts an all-gather (allGather with `ownSent`).
void reduceScatter(Step& st, const GroupRing& ring, const Region& r, bool forwardOwn = false) {
  const int n = ring.size();
  int k = ring.at(-1);
  addSend(st, ring.next(), r.src(k), r.bytes(k));
  for (int s = 1; s <= n - 2; ++s) {
    k = ring.at(-1 - s);
    addRecvReduceSend(st, ring.prev(), ring.next(), r.dst(k), r.src(k), r.bytes(k));
  }
  const int own = ring.pos;
  if (forwardOwn)
    addRecvReduceSend(st, ring.prev(), ring.next(), r.dst(own), r.src(own), r.bytes(own));
  else
    addRecvReduce(st, ring.prev(), r.dst(own), r.src(own), r.bytes(own));
}

// All-gather around `ring` of the segments each position holds in `r.out`.
void allGather(Step& st, const GroupRing& ring, const Region& r, bool ownSent = false) {
  const int n = ring.size();
  if (!ownSent) addSend(st, ring.next(), r.dst(ring.pos), r.bytes(ring.pos));
  for (int t = 1; t <= n - 2; ++t) {
    const int k = ring.at(-t);
    addRecvSend(st, ring.prev(), ring.next(), r.dst(k), r.bytes(k));
  }
  const int k = ring.at(1);
  addRecv(st, ring.prev(), r.dst(k), r.bytes(k));
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
  if (a.coll != CollType::AllReduce)
    return invalidUsage(std::string("the hierarchical algorithm does not implement ") +
                        collTypeName(a.coll) + "; choose another algorithm.");
  std::vector<std::vector<int>> groups;
  LANES_RETURN_IF_ERROR(hostGroups(hostOf, a.nranks, &groups));
  const size_t esz = datatypeSize(a.type);
  if (a.nranks == 1) {
    localCopySchedule(a.send, a.recv, a.count * esz, out);
    return Status::ok();
  }
  if (a.count == 0) return Status::ok();
  const int hosts = static_cast<int>(groups.size());
  const int local = static_cast<int>(groups.front().size());
  // This rank's host and its place there; the shard it carries across hosts.
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

  const Region shards{a.send, a.recv, 0, Segments{a.count, local}, esz};
  if (local > 1) reduceScatter(out->addStep(), within, shards);
  if (hosts > 1) {
    // Shard `within.pos` across the hosts, in place in recv once the host's
    // sum is there (else straight from send).
    const size_t base = shards.seg.offset(within.pos) * esz;
    const void* in = local > 1 ? a.recv : a.send;
    allReduce(out->addStep(), across,
              Region{in, a.recv, base, Segments{shards.seg.size(within.pos), hosts}, esz});
  }
  if (local > 1) allGather(out->addStep(), within, shards);
  return Status::ok();
}

}  // namespace lanes::algo
