// SumArena: a communicator's shared memory for host summation of host
// buffers (src/exec/arena_sum.h), all ranks on one host: per rank three
// counters (ready, reduced, consumed), each on a 64-byte line of its own,
// then kSlots input slots of kChunkBytes per rank, then kSlots result slots.
// Chunk g (numbered from 1, the same on every rank) uses slot g % kSlots. It
// also keeps this rank's cursors, the next chunk to put, to sum and to get:
// calls take their chunks in call order (reserve) and each stage runs them
// in that order, so every counter only ever steps forward. Made at init
// (core/init.cc) where the plan may be taken: (N+1) x kSlots x kChunkBytes
// of /dev/shm, 18 MiB for 8 ranks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/deadline.h"
#include "base/status.h"
#include "bootstrap/bootstrap.h"
#include "transport/shm/shared_block.h"

namespace lanes {

enum class SumFlag : int { Ready = 0, Reduced = 1, Consumed = 2 };

class SumArena {
 public:
  // A slot: large enough that the flag hand-offs cost little against the
  // copies and sums of a chunk, small enough that kSlots of them per rank
  // stay in the last-level cache of a many-core host.
  static constexpr size_t kChunkBytes = size_t{256} << 10;
  static constexpr int kSlots = 8;
  static constexpr size_t kLine = 64;

  // Shared memory for `nranks` ranks: what create reserves.
  static size_t bytesFor(int nranks);
  // Collective over `bootstrap` (see SharedBlock::create for `fatal`).
  static Status create(Bootstrap& bootstrap, const std::string& commTag, Deadline deadline,
                       std::unique_ptr<SumArena>* out, bool* fatal);

  int nranks() const { return nranks_; }
  std::byte* input(int rank, int slot) const {
    return block_->data() + flagsBytes_ +
           (static_cast<size_t>(rank) * kSlots + static_cast<size_t>(slot)) * kChunkBytes;
  }
  std::byte* result(int slot) const { return input(nranks_, slot); }
  uint32_t* flag(SumFlag f, int rank) const {
    return reinterpret_cast<uint32_t*>(
        block_->data() + (static_cast<size_t>(rank) * 3 + static_cast<size_t>(f)) * kLine);
  }
  static int slotOf(uint32_t chunk) { return static_cast<int>(chunk % kSlots); }

  // The first of `chunks` chunk numbers for the next call (in call order).
  uint32_t reserve(uint32_t chunks) {
    const uint32_t first = reserved_;
    reserved_ += chunks;
    return first;
  }
  // The next chunk each of this rank's stages may run.
  uint32_t nextPut = 1, nextSum = 1, nextGet = 1;

 private:
  SumArena(int nranks, std::unique_ptr<SharedBlock> block);
  int nranks_ = 0;
  size_t flagsBytes_ = 0;
  uint32_t reserved_ = 1;
  std::unique_ptr<SharedBlock> block_;
};

}  // namespace lanes
