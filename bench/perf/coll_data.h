// The pure half of every CollSpec: counts, bandwidth arithmetic, inputs and
// expected outputs. Header-only, with no call into the library, so unit tests
// check it without running a collective.
#pragma once

#include <optional>

#include "coll.h"
#include "pattern.h"

namespace lanes::perf::data {

inline PatternKey patternOf(const DataKey& k) { return {k.type, k.op, k.nranks, k.seed}; }

inline Expected reduced(const DataKey& k, uint64_t index) {
  PatternKey p = patternOf(k);
  return {reduceExpected(p, index), reduceTolerance(p, index)};
}

inline double copied(const DataKey& k, int owner, uint64_t index) {
  return copyValue(k.type, owner, index, k.seed);
}

// count: elements the size holds; per-rank blocks round down as nccl-tests does.
inline CollCounts sameCounts(size_t count, int) { return {count, count, count, 0, 0}; }
inline CollCounts gatherCounts(size_t count, int n) {  // all-gather, gather
  size_t c = count / static_cast<size_t>(n);
  return {c, c * n, c, c, 0};
}
inline CollCounts scatterCounts(size_t count, int n) {  // reduce-scatter, scatter
  size_t c = count / static_cast<size_t>(n);
  return {c * n, c, c, 0, c};
}
inline CollCounts allToAllCounts(size_t count, int n) {
  size_t c = count / static_cast<size_t>(n);
  return {c * n, c * n, c, 0, 0};
}

inline double paramBytes(size_t p, size_t ts, int) { return static_cast<double>(p * ts); }
inline double allRanksBytes(size_t p, size_t ts, int n) { return static_cast<double>(p * ts) * n; }

// hypercube (nccl-tests' hypercube.cu): an all-gather by recursive doubling,
// each rank's block a multiple of 4 elements; algbw counts the (n-1) blocks a
// rank receives, busbw factor 1.
inline CollCounts hyperCubeCounts(size_t count, int n) {
  size_t c = count / (4 * static_cast<size_t>(n)) * 4;
  return {c, c * n, c, c, 0};
}
inline double othersBytes(size_t p, size_t ts, int n) {
  return static_cast<double>(p * ts) * (n - 1);
}
inline bool anyRanks(int) { return true; }
inline bool powerOfTwoRanks(int n) { return n > 0 && (n & (n - 1)) == 0; }

// Least traffic per rank and call (RankTraffic). c.paramCount elements of
// ts bytes; S = one rank's whole buffer where the collective has one.
inline RankTraffic allReduceTraffic(const CollCounts& c, size_t ts, int, int n, int) {
  // Each rank's reduced share leaves and the others' come in: 2 (n-1)/n S
  // each way, nccl-tests' busbw numerator.
  double s = static_cast<double>(c.paramCount * ts);
  return {2.0 * (n - 1) / n * s, 2.0 * (n - 1) / n * s};
}
inline RankTraffic allGatherTraffic(const CollCounts& c, size_t ts, int, int n, int) {
  double b = static_cast<double>(c.paramCount * ts);
  return {b, b * (n - 1)};  // own block out once, the n-1 others in
}
inline RankTraffic reduceScatterTraffic(const CollCounts& c, size_t ts, int, int n, int) {
  double b = static_cast<double>(c.paramCount * ts);
  return {b * (n - 1), b * (n - 1)};  // the others' blocks out, their shares of mine in
}
inline RankTraffic broadcastTraffic(const CollCounts& c, size_t ts, int rank, int, int root) {
  double s = static_cast<double>(c.paramCount * ts);
  return rank == root ? RankTraffic{s, 0} : RankTraffic{0, s};
}
inline RankTraffic reduceTraffic(const CollCounts& c, size_t ts, int rank, int, int root) {
  double s = static_cast<double>(c.paramCount * ts);
  return rank == root ? RankTraffic{0, s} : RankTraffic{s, 0};
}
inline RankTraffic allToAllTraffic(const CollCounts& c, size_t ts, int, int n, int) {
  double b = static_cast<double>(c.paramCount * ts) * (n - 1);
  return {b, b};
}
inline RankTraffic gatherTraffic(const CollCounts& c, size_t ts, int rank, int n, int root) {
  double b = static_cast<double>(c.paramCount * ts);
  return rank == root ? RankTraffic{0, b * (n - 1)} : RankTraffic{b, 0};
}
inline RankTraffic scatterTraffic(const CollCounts& c, size_t ts, int rank, int n, int root) {
  double b = static_cast<double>(c.paramCount * ts);
  return rank == root ? RankTraffic{b * (n - 1), 0} : RankTraffic{0, b};
}
inline RankTraffic sendRecvTraffic(const CollCounts& c, size_t ts, int, int, int) {
  double s = static_cast<double>(c.paramCount * ts);
  return {s, s};
}

// all-reduce
inline double allReduceInput(const DataKey& k, size_t i) {
  return reduceInput(patternOf(k), k.rank, i);
}
inline std::optional<Expected> allReduceExpect(const DataKey& k, size_t i) { return reduced(k, i); }

// reduce: like all-reduce, but only the root's buffer is defined
inline std::optional<Expected> reduceExpect(const DataKey& k, size_t i) {
  if (k.rank != k.root) return std::nullopt;
  return reduced(k, i);
}

// reduce-scatter: send element i is global index i; rank r keeps block r
inline std::optional<Expected> reduceScatterExpect(const DataKey& k, size_t i) {
  return reduced(k, static_cast<uint64_t>(k.rank) * k.paramCount + i);
}

// data movement: each rank's own values
inline double ownInput(const DataKey& k, size_t i) { return copied(k, k.rank, i); }

inline std::optional<Expected> allGatherExpect(const DataKey& k, size_t i) {
  return Expected{copied(k, static_cast<int>(i / k.paramCount), i % k.paramCount), 0};
}
inline std::optional<Expected> gatherExpect(const DataKey& k, size_t i) {
  if (k.rank != k.root) return std::nullopt;
  return allGatherExpect(k, i);
}
inline std::optional<Expected> broadcastExpect(const DataKey& k, size_t i) {
  return Expected{copied(k, k.root, i), 0};
}
// scatter: the root's block r goes to rank r
inline std::optional<Expected> scatterExpect(const DataKey& k, size_t i) {
  return Expected{copied(k, k.root, static_cast<uint64_t>(k.rank) * k.paramCount + i), 0};
}
// all-to-all: sender s's block for rank r lands in r's block s
inline std::optional<Expected> allToAllExpect(const DataKey& k, size_t i) {
  int sender = static_cast<int>(i / k.paramCount);
  return Expected{
      copied(k, sender, static_cast<uint64_t>(k.rank) * k.paramCount + i % k.paramCount), 0};
}
// send/recv ring: each rank sends to rank+1 and receives from rank-1
inline int sendPeer(int rank, int n) { return (rank + 1) % n; }
inline int recvPeer(int rank, int n) { return (rank + n - 1) % n; }
inline std::optional<Expected> sendRecvExpect(const DataKey& k, size_t i) {
  return Expected{copied(k, recvPeer(k.rank, k.nranks), i), 0};
}

}  // namespace lanes::perf::data
