// Host summation of host buffers: one rank's all-reduce or reduce-scatter
// through the communicator's shared arena (transport/shm/sum_arena.h),
// advanced by the host executor's polls, never blocking. Per chunk g (slot
// g % kSlots):
//   put:  once every rank consumed chunk g - kSlots, copy my chunk into my
//         input slot (a reduce-scatter: my input's piece of every rank's
//         block, side by side); ready[me] = g.
//   sum:  once every rank's ready reached g, reduce my segment (a
//         reduce-scatter: my block) of every rank's input slot, in rank
//         order, into the result slot; reduced[me] = g.
//   get:  once every owner I read summed chunk g, copy the result (all of
//         it, or my block) into my output; consumed[me] = g.
// Each input is copied once into shared memory and the result once out of
// it, where a ring copies every byte through a transport 2(N-1) times; two
// hand-offs a chunk instead of 2(N-1) hops. Stages of later chunks overlap
// the peers' work on earlier ones (up to kSlots chunks ahead). Every segment
// is summed once, by its owner, so every rank gets the same bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/datatype.h"
#include "transport/shm/sum_arena.h"

namespace lanes {

class ArenaSum {
 public:
  // `count`: elements of the output (a reduce-scatter: each rank's block);
  // `first`: the call's first chunk (SumArena::reserve(chunksFor(...))).
  ArenaSum(bool scatter, const void* send, void* recv, size_t count, lanesDataType_t type,
           RedOpKind op, int nranks, uint32_t first);

  // Chunks a call takes, the same on every rank.
  static uint32_t chunksFor(bool scatter, size_t count, size_t elem, int nranks);

  // Runs every stage the peers' counters allow now; *progressed when any did.
  void progress(SumArena& arena, int rank, bool* progressed);
  bool done() const { return got_ == chunks_; }
  // What it waits for ("rank 2's ready of chunk 17"), and those ranks.
  std::string waiting(const SumArena& arena, int rank, std::vector<int>* peers) const;

 private:
  // Where chunk i starts, and its length, in elements.
  size_t offset(uint32_t i) const { return static_cast<size_t>(i) * chunkElems_; }
  size_t length(uint32_t i) const { return std::min(chunkElems_, count_ - offset(i)); }
  // My segment of chunk i of an all-reduce: [*begin, *begin + return).
  size_t segment(uint32_t i, int rank, size_t* begin) const;
  bool tryPut(SumArena& arena, int rank);
  bool trySum(SumArena& arena, int rank);
  bool tryGet(SumArena& arena, int rank);

  bool scatter_;
  const std::byte* send_;
  std::byte* recv_;
  size_t count_;
  lanesDataType_t type_;
  RedOpKind op_;
  int nranks_;
  size_t elem_;
  size_t chunkElems_ = 0;
  uint32_t first_, chunks_ = 0;
  uint32_t put_ = 0, summed_ = 0, got_ = 0;  // chunks through each stage
};

}  // namespace lanes
