// Helpers the algorithms share to lay out buffers and append ops. Every
// helper skips zero-byte ops, and since both ends of a transfer compute the
// same sizes from the same arguments, a skipped op is skipped on both sides.
#pragma once

#include <cstddef>
#include <span>

#include "algorithms/algorithm.h"
#include "algorithms/schedule.h"
#include "base/datatype.h"

namespace lanes::algo {

// Splits `count` elements into `parts` contiguous segments whose sizes differ
// by at most one element (the first count % parts segments get the extra one).
struct Segments {
  size_t count = 0;
  int parts = 1;
  size_t offset(int i) const {
    const size_t base = count / parts, extra = count % parts;
    const size_t ui = static_cast<size_t>(i);
    return ui * base + (ui < extra ? ui : extra);
  }
  size_t size(int i) const {
    return count / parts + (static_cast<size_t>(i) < count % parts ? 1 : 0);
  }
};

inline int mod(int a, int n) { return ((a % n) + n) % n; }

// The largest power of two <= n (n >= 1).
inline int floorPow2(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

inline const std::byte* at(const void* base, size_t byteOffset) {
  return static_cast<const std::byte*>(base) + byteOffset;
}
inline std::byte* at(void* base, size_t byteOffset) {
  return static_cast<std::byte*>(base) + byteOffset;
}

inline void addSend(Step& s, int peer, const void* src, size_t bytes) {
  if (bytes == 0) return;
  s.ops.push_back(Op{OpKind::Send, peer, -1, src, nullptr, bytes});
}
inline void addRecv(Step& s, int peer, void* dst, size_t bytes) {
  if (bytes == 0) return;
  s.ops.push_back(Op{OpKind::Recv, -1, peer, nullptr, dst, bytes});
}
inline void addRecvReduce(Step& s, int peer, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  s.ops.push_back(Op{OpKind::RecvReduce, -1, peer, src, dst, bytes});
}
inline void addRecvSend(Step& s, int from, int to, void* dst, size_t bytes) {
  if (bytes == 0) return;
  s.ops.push_back(Op{OpKind::RecvSend, to, from, nullptr, dst, bytes});
}
inline void addRecvReduceSend(Step& s, int from, int to, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  s.ops.push_back(Op{OpKind::RecvReduceSend, to, from, src, dst, bytes});
}
// A local copy; nothing when source and destination are the same bytes.
inline void addCopy(Step& s, void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  s.ops.push_back(Op{OpKind::Copy, -1, -1, src, dst, bytes});
}

// Starts a schedule: name, type and reduction filled in, no steps.
void beginSchedule(const CollArgs& args, const char* algo, Schedule* out);

// The schedule of a single rank (or of a zero-byte call) for collectives whose
// output is the input: one local copy when out-of-place.
void localCopySchedule(const void* src, void* dst, size_t bytes, Schedule* out);

// `order`: position p of the ring holds rank order[p]; empty: rank p.
Status buildRing(const CollArgs& args, std::span<const int> order, Schedule* out);
Status buildRecursiveDoubling(const CollArgs& args, Schedule* out);
Status buildHalvingDoubling(const CollArgs& args, Schedule* out);
Status buildChain(const CollArgs& args, Schedule* out);
Status buildPairwise(const CollArgs& args, Schedule* out);
Status buildDirect(const CollArgs& args, Schedule* out);
Status buildTree(const CollArgs& args, Schedule* out);
Status buildHierarchical(const CollArgs& args, std::span<const int> hostOf, Schedule* out);
Status buildSharedSum(const CollArgs& args, Schedule* out);

}  // namespace lanes::algo
