// How the host-staged path cuts a call into pipeline chunks (shared by its
// all-reduce and its gather/scatter choreographies). Pure arithmetic, the
// same on every rank for the same call.
#pragma once

#include <algorithm>
#include <cstddef>

namespace lanes::staged {

inline constexpr size_t kMiB = size_t{1} << 20;

inline size_t ceilDiv(size_t a, size_t b) { return (a + b - 1) / b; }
inline size_t roundUp(size_t v, size_t m) { return ceilDiv(v, m) * m; }

// Bytes of one pipeline chunk for a call of `bytes`: a whole slot for large
// calls, since each copy then moves 16 MiB / nranks and runs near the link's
// rate (on the H200, 256 MiB with 2 ranks: 12.5 ms with 16 MiB chunks, 14.4 ms
// with 4 MiB, 22.3 ms with 1 MiB); smaller calls are cut into 8 chunks so the
// stages still overlap, but not below 4 MiB.
inline size_t pipelineChunkBytes(size_t slotBytes, size_t bytes) {
  const size_t eighth = roundUp(ceilDiv(bytes, 8), 64 * 1024);
  return std::min(slotBytes, std::max(eighth, 4 * kMiB));
}

}  // namespace lanes::staged
