// How the host-staged path cuts a call into pipeline chunks (shared by its
// all-reduce and its gather/scatter choreographies, and read by the planner's
// cost model). Pure arithmetic, the same on every rank for the same call.
#pragma once

#include <algorithm>
#include <cstddef>

namespace lanes::staged {

inline constexpr size_t kMiB = size_t{1} << 20;

inline size_t ceilDiv(size_t a, size_t b) { return (a + b - 1) / b; }
inline size_t roundUp(size_t v, size_t m) { return ceilDiv(v, m) * m; }

// Bytes of one pipeline chunk for a call of `bytes`: a whole slot for large
// calls, since each copy then moves 16 MiB / nranks and runs near the link's
// rate, where smaller copies fall well short of it (docs/gpu_data_path.md,
// "Arena", has the measurements); smaller calls are cut into 8 chunks so the
// stages still overlap, but not below 4 MiB.
inline size_t pipelineChunkBytes(size_t slotBytes, size_t bytes) {
  const size_t eighth = roundUp(ceilDiv(bytes, 8), 64 * 1024);
  return std::min(slotBytes, std::max(eighth, 4 * kMiB));
}

// Elements of one all-reduce chunk of a call of `count` elements of `elem`
// bytes among `nranks` ranks: chunks of equal size (but the last), each a
// multiple of nranks x `align` elements and at most a pipeline chunk (above)
// that fits a slot of `slotBytes`. A chunk's nranks segments of
// ceil(len / nranks) elements rounded up to `align` then fit one slot side by
// side, which the inbox layout of the host-staged all-reduce needs; equal
// sizes keep a call from ending in a chunk of a few elements. 0 for a count
// of 0. Needs nranks x align x elem <= slotBytes (the staged path's setup
// refuses more ranks than that).
inline size_t allReduceChunkElems(size_t slotBytes, size_t count, size_t elem, size_t nranks,
                                  size_t align) {
  const size_t unit = nranks * align;
  const size_t most = pipelineChunkBytes(slotBytes, count * elem) / elem / unit * unit;
  if (most == 0) return unit;  // outside the precondition; never 0 (the caller loops on it)
  const size_t chunks = std::max<size_t>(1, ceilDiv(count, most));
  return roundUp(ceilDiv(count, chunks), unit);
}

}  // namespace lanes::staged
