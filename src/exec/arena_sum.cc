#include "exec/arena_sum.h"

#include <algorithm>
#include <cstring>

#include "exec/staged_chunking.h"
#include "kernels/cpu/reduce.h"

namespace lanes {
namespace {

// Segments start at a cache line, so no two ranks write one line.
constexpr size_t kLineBytes = 64;

size_t alignOf(size_t elem) { return std::max<size_t>(1, kLineBytes / elem); }

// Bytes of a chunk for a call of `bytes`: an eighth of it, so that a mid-size
// call still pipelines (a rank puts chunk g+1 while its peers sum chunk g),
// but at least 32 KiB (each chunk costs two hand-offs) and at most a slot.
size_t pipelineBytes(size_t bytes) {
  const size_t eighth = staged::roundUp(staged::ceilDiv(bytes, 8), 4096);
  return std::min(SumArena::kChunkBytes, std::max(eighth, size_t{32} << 10));
}

// Elements per chunk: an all-reduce's chunk holds nranks segments (chunks
// of equal size, as the staged path cuts them), a reduce-scatter's slot one
// piece of every rank's block.
size_t chunkElemsFor(bool scatter, size_t count, size_t elem, int nranks) {
  const size_t align = alignOf(elem);
  const auto n = static_cast<size_t>(nranks);
  if (scatter) {
    const size_t perRank = pipelineBytes(count * elem * n) / n;
    return std::max(align, perRank / elem / align * align);
  }
  const size_t unit = n * align;
  const size_t most = std::max(unit, pipelineBytes(count * elem) / elem / unit * unit);
  const size_t chunks = std::max<size_t>(1, staged::ceilDiv(count, most));
  return staged::roundUp(staged::ceilDiv(count, chunks), unit);
}

uint32_t load(const uint32_t* flag) { return __atomic_load_n(flag, __ATOMIC_ACQUIRE); }
void store(uint32_t* flag, uint32_t v) { __atomic_store_n(flag, v, __ATOMIC_RELEASE); }
// Counter `have` has reached chunk `want` (modulo 2^32).
bool reached(uint32_t have, uint32_t want) { return static_cast<int32_t>(have - want) >= 0; }

}  // namespace

ArenaSum::ArenaSum(bool scatter, const void* send, void* recv, size_t count, lanesDataType_t type,
                   RedOpKind op, int nranks, uint32_t first)
    : scatter_(scatter),
      send_(static_cast<const std::byte*>(send)),
      recv_(static_cast<std::byte*>(recv)),
      count_(count),
      type_(type),
      op_(op),
      nranks_(nranks),
      elem_(datatypeSize(type)),
      first_(first) {
  chunkElems_ = chunkElemsFor(scatter, count, elem_, nranks);
  chunks_ = chunksFor(scatter, count, elem_, nranks);
}

uint32_t ArenaSum::chunksFor(bool scatter, size_t count, size_t elem, int nranks) {
  if (count == 0) return 0;
  return static_cast<uint32_t>(staged::ceilDiv(count, chunkElemsFor(scatter, count, elem, nranks)));
}

size_t ArenaSum::segment(uint32_t i, int rank, size_t* begin) const {
  const size_t len = length(i);
  const size_t seg =
      staged::roundUp(staged::ceilDiv(len, static_cast<size_t>(nranks_)), alignOf(elem_));
  *begin = std::min(len, seg * static_cast<size_t>(rank));
  return std::min(len, *begin + seg) - *begin;
}

bool ArenaSum::tryPut(SumArena& arena, int rank) {
  if (put_ == chunks_) return false;
  const uint32_t g = first_ + put_;
  if (arena.nextPut != g) return false;  // an earlier call's chunks go first
  // The slot is free once every rank took chunk g - kSlots out of it.
  for (int p = 0; p < nranks_; ++p)
    if (!reached(load(arena.flag(SumFlag::Consumed, p)), g - SumArena::kSlots)) return false;
  std::byte* slot = arena.input(rank, SumArena::slotOf(g));
  const size_t off = offset(put_), len = length(put_);
  if (scatter_) {
    for (int p = 0; p < nranks_; ++p)
      std::memcpy(slot + static_cast<size_t>(p) * chunkElems_ * elem_,
                  send_ + (static_cast<size_t>(p) * count_ + off) * elem_, len * elem_);
  } else {
    std::memcpy(slot, send_ + off * elem_, len * elem_);
  }
  store(arena.flag(SumFlag::Ready, rank), g);
  ++arena.nextPut;
  ++put_;
  return true;
}

bool ArenaSum::trySum(SumArena& arena, int rank) {
  if (summed_ == put_) return false;
  const uint32_t g = first_ + summed_;
  if (arena.nextSum != g) return false;
  for (int p = 0; p < nranks_; ++p)
    if (!reached(load(arena.flag(SumFlag::Ready, p)), g)) return false;
  const int slot = SumArena::slotOf(g);
  size_t begin = 0, len = 0;
  if (scatter_) {
    begin = static_cast<size_t>(rank) * chunkElems_;
    len = length(summed_);
  } else {
    len = segment(summed_, rank, &begin);
  }
  if (len > 0) {
    const size_t at = begin * elem_;
    std::byte* dst = arena.result(slot) + at;
    cpu::reduce(dst, arena.input(0, slot) + at, arena.input(1, slot) + at, len, type_, op_);
    for (int p = 2; p < nranks_; ++p)
      cpu::reduce(dst, dst, arena.input(p, slot) + at, len, type_, op_);
  }
  store(arena.flag(SumFlag::Reduced, rank), g);
  ++arena.nextSum;
  ++summed_;
  return true;
}

bool ArenaSum::tryGet(SumArena& arena, int rank) {
  if (got_ == summed_) return false;
  const uint32_t g = first_ + got_;
  if (arena.nextGet != g) return false;
  if (scatter_) {
    if (!reached(load(arena.flag(SumFlag::Reduced, rank)), g)) return false;
  } else {
    for (int p = 0; p < nranks_; ++p)
      if (!reached(load(arena.flag(SumFlag::Reduced, p)), g)) return false;
  }
  const std::byte* result = arena.result(SumArena::slotOf(g));
  const size_t len = length(got_);
  if (scatter_)
    std::memcpy(recv_ + offset(got_) * elem_,
                result + static_cast<size_t>(rank) * chunkElems_ * elem_, len * elem_);
  else
    std::memcpy(recv_ + offset(got_) * elem_, result, len * elem_);
  store(arena.flag(SumFlag::Consumed, rank), g);
  ++arena.nextGet;
  ++got_;
  return true;
}

void ArenaSum::progress(SumArena& arena, int rank, bool* progressed) {
  // Results out first (they free slots), then sums, then new inputs in.
  for (bool moved = true; moved;) {
    moved = tryGet(arena, rank);
    moved = trySum(arena, rank) || moved;
    moved = tryPut(arena, rank) || moved;
    if (moved) *progressed = true;
  }
}

std::string ArenaSum::waiting(const SumArena& arena, int rank, std::vector<int>* peers) const {
  std::string out;
  auto need = [&](SumFlag f, int p, uint32_t g, const char* what) {
    if (reached(load(arena.flag(f, p)), g)) return;
    out += (out.empty() ? "" : ", ") + std::string("rank ") + std::to_string(p) + "'s " + what +
           " of chunk " + std::to_string(g);
    if (std::find(peers->begin(), peers->end(), p) == peers->end()) peers->push_back(p);
  };
  if (got_ < summed_) {
    for (int p = 0; p < nranks_; ++p)
      if (!scatter_ || p == rank) need(SumFlag::Reduced, p, first_ + got_, "sum");
  } else if (summed_ < put_) {
    for (int p = 0; p < nranks_; ++p) need(SumFlag::Ready, p, first_ + summed_, "input");
  } else if (put_ < chunks_) {
    for (int p = 0; p < nranks_; ++p)
      need(SumFlag::Consumed, p, first_ + put_ - SumArena::kSlots, "result taken");
  }
  return "host summation in the shared arena (" + std::to_string(got_) + " of " +
         std::to_string(chunks_) + " chunks done" + (out.empty() ? "" : "; waiting for " + out) +
         ")";
}

}  // namespace lanes
