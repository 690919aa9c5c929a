// Input and expected values for the perf tools' data check.
//
// Inputs are chosen so the reduced result is exact in the datatype whatever
// order or tree the library combines ranks in: every partial result of any
// subset of ranks is an integer the type holds exactly.
// - sum/avg: element j is non-zero on at most A ranks (a window that rotates
//   with j), each contributing +-1..M, with A*M <= exactIntLimit(type).
// - prod: at most A ranks contribute +-1 or +-2, the rest 1; 2^A <= limit.
// - max/min: every rank contributes an integer in [-K, K] (unsigned [0, K]);
//   max/min never round.
// - avg: integers divide truncating (exact); floats with a power-of-two rank
//   count divide exactly. With other rank counts Lanes may scale by 1/n
//   before or after summing (as NCCL does), which rounds: there the check
//   allows a few ulps (avgTolerance), the one non-exact comparison.
// Data-movement collectives use copyValue: distinct small integers per
// (rank, index), exact in every type.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "element.h"
#include "lanes/lanes.h"

namespace lanes::perf {

struct PatternKey {
  lanesDataType_t type = lanesFloat32;
  lanesRedOp_t op = lanesSum;
  int nranks = 1;
  uint64_t seed = 0;  // changes the data between checks
};

namespace pattern_detail {

inline uint64_t limit(lanesDataType_t t) { return exactIntLimit(t); }

// Magnitude bound M and window A for sum/avg.
inline void sumShape(const PatternKey& k, uint64_t* m, uint64_t* a) {
  uint64_t L = limit(k.type);
  uint64_t n = static_cast<uint64_t>(k.nranks);
  *m = std::clamp<uint64_t>(L / n, 1, 4);
  *a = std::min<uint64_t>(n, L / *m);
}

inline uint64_t prodWindow(const PatternKey& k) {
  uint64_t L = limit(k.type);
  uint64_t bits = 0;
  while ((uint64_t{2} << bits) <= L) ++bits;  // largest bits with 2^bits <= L
  return std::min<uint64_t>(static_cast<uint64_t>(k.nranks), bits);
}

// Whether rank r is inside element j's window of width a.
inline bool inWindow(int r, uint64_t j, uint64_t a, int n) {
  uint64_t n64 = static_cast<uint64_t>(n);
  return (static_cast<uint64_t>(r) + n64 - j % n64) % n64 < a;
}

inline double signFor(const PatternKey& k, int r, uint64_t j) {
  return (isSignedType(k.type) && (static_cast<uint64_t>(r) + j) % 3 == 2) ? -1.0 : 1.0;
}

inline bool isPow2(int n) { return n > 0 && (n & (n - 1)) == 0; }

}  // namespace pattern_detail

// What rank `r` contributes at element `index` of a reduction.
inline double reduceInput(const PatternKey& k, int r, uint64_t index) {
  using namespace pattern_detail;
  const uint64_t j = index + k.seed;
  const auto r64 = static_cast<uint64_t>(r);
  switch (k.op) {
    case lanesProd: {
      if (!inWindow(r, j, prodWindow(k), k.nranks)) return 1.0;
      return signFor(k, r, j) * static_cast<double>(1 + (r64 * 5 + j * 3) % 2);
    }
    case lanesMax:
    case lanesMin: {
      uint64_t K = std::min<uint64_t>(limit(k.type), 8);
      uint64_t h = r64 * 7 + j * 13 + (j >> 4);
      if (!isSignedType(k.type)) return static_cast<double>(h % (K + 1));
      return static_cast<double>(static_cast<int64_t>(h % (2 * K + 1)) - static_cast<int64_t>(K));
    }
    default: {  // sum, avg
      uint64_t m = 0, a = 0;
      sumShape(k, &m, &a);
      if (!inWindow(r, j, a, k.nranks)) return 0.0;
      return signFor(k, r, j) * static_cast<double>(1 + (r64 * 5 + j * 3) % m);
    }
  }
}

// The exact combination over all ranks (before avg's division).
inline double combinedExact(const PatternKey& k, uint64_t index) {
  double acc = k.op == lanesProd ? 1.0 : 0.0;
  for (int r = 0; r < k.nranks; ++r) {
    double v = reduceInput(k, r, index);
    switch (k.op) {
      case lanesProd:
        acc *= v;
        break;
      case lanesMax:
        acc = r == 0 ? v : std::max(acc, v);
        break;
      case lanesMin:
        acc = r == 0 ? v : std::min(acc, v);
        break;
      default:
        acc += v;
        break;
    }
  }
  return acc;
}

// The value every rank (or the root) must hold at `index` after the reduction.
inline double reduceExpected(const PatternKey& k, uint64_t index) {
  double c = combinedExact(k, index);
  if (k.op != lanesAvg) return c;
  if (!isFloat(k.type)) return std::trunc(c / k.nranks);
  return roundTo(k.type, c / k.nranks);
}

// How far a result may be from reduceExpected and still count as right: 0
// except avg on floating types with a rank count that is not a power of two.
inline double reduceTolerance(const PatternKey& k, uint64_t index) {
  if (k.op != lanesAvg || !isFloat(k.type) || pattern_detail::isPow2(k.nranks)) return 0.0;
  double sumAbs = 0;
  for (int r = 0; r < k.nranks; ++r) sumAbs += std::fabs(reduceInput(k, r, index));
  const double u = std::ldexp(1.0, -significandBits(k.type));  // unit roundoff
  return (k.nranks + 3) * u * std::max(sumAbs / k.nranks, std::fabs(reduceExpected(k, index)));
}

// Data-movement collectives: the value rank `r` owns at `index`; distinct
// small integers, exact in every type (including uint8 and float8 e5m2).
inline double copyValue(lanesDataType_t t, int r, uint64_t index, uint64_t seed) {
  const uint64_t K = std::min<uint64_t>(exactIntLimit(t), 8);
  const uint64_t h = static_cast<uint64_t>(r) * 5 + (index + seed) * 3 + ((index + seed) >> 3);
  if (!isSignedType(t)) return static_cast<double>(h % (K + 1));
  return static_cast<double>(static_cast<int64_t>(h % (2 * K + 1)) - static_cast<int64_t>(K));
}

// Whether `got` counts as the expected value.
inline bool matches(double got, double expected, double tolerance) {
  if (tolerance == 0) return got == expected;
  return std::fabs(got - expected) <= tolerance;
}

}  // namespace lanes::perf
