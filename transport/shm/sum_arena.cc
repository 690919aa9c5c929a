#include "transport/shm/sum_arena.h"

#include <utility>

namespace lanes {
namespace {

size_t flagsBytesFor(int nranks) {
  constexpr size_t kPage = 4096;
  const size_t lines = static_cast<size_t>(nranks) * 3;
  return (lines * SumArena::kLine + kPage - 1) / kPage * kPage;
}

}  // namespace

size_t SumArena::bytesFor(int nranks) {
  return flagsBytesFor(nranks) + static_cast<size_t>(nranks + 1) * kSlots * kChunkBytes;
}

SumArena::SumArena(int nranks, std::unique_ptr<SharedBlock> block)
    : nranks_(nranks), flagsBytes_(flagsBytesFor(nranks)), block_(std::move(block)) {}

Status SumArena::create(Bootstrap& bootstrap, const std::string& commTag, Deadline deadline,
                        std::unique_ptr<SumArena>* out, bool* fatal) {
  const int n = bootstrap.nranks();
  SharedBlockSpec spec;
  spec.name = "/" + commTag + "-sum";
  spec.what = "host-summation arena";
  spec.bytes = bytesFor(n);
  spec.createHint = " (" + std::to_string(n + 1) + " x " + std::to_string(kSlots) + " slots of " +
                    sharedSizeText(kChunkBytes) +
                    "). Make /dev/shm larger, or leave shared_sum out of LANES_ALGO; the calls "
                    "take another algorithm meanwhile.";
  std::unique_ptr<SharedBlock> block;
  LANES_RETURN_IF_ERROR(SharedBlock::create(bootstrap, spec, deadline, &block, fatal));
  out->reset(new SumArena(n, std::move(block)));
  return Status::ok();
}

}  // namespace lanes
