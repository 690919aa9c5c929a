// Element values as the perf tools see them: every value they write or expect
// is a small integer (or, for avg, a short dyadic fraction), so it has an
// exact double. encode/decode move such values in and out of any Lanes
// datatype; this is an independent implementation, not the library's, so a
// conversion bug in Lanes cannot hide itself.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "base/datatype.h"
#include "lanes/lanes.h"

namespace lanes::perf {

// The library's own table: one place knows the element sizes.
inline size_t elementSize(lanesDataType_t t) { return datatypeSize(t); }

inline bool isFloat(lanesDataType_t t) {
  return t == lanesFloat16 || t == lanesFloat32 || t == lanesFloat64 || t == lanesBfloat16 ||
         t == lanesFloat8e4m3 || t == lanesFloat8e5m2;
}

inline bool isSignedType(lanesDataType_t t) {
  return t != lanesUint8 && t != lanesUint32 && t != lanesUint64;
}

// Significand bits including the hidden bit (floating types only).
inline int significandBits(lanesDataType_t t) {
  switch (t) {
    case lanesFloat16:
      return 11;
    case lanesBfloat16:
      return 8;
    case lanesFloat32:
      return 24;
    case lanesFloat64:
      return 53;
    case lanesFloat8e4m3:
      return 4;
    case lanesFloat8e5m2:
      return 3;
    default:
      return 64;
  }
}

// Largest N such that every integer in [0, N] (and [-N, 0] for signed types)
// is exact in the type. Capped at 2^20: the tools never need more.
inline uint64_t exactIntLimit(lanesDataType_t t) {
  constexpr uint64_t kCap = 1u << 20;
  uint64_t v = 0;
  switch (t) {
    case lanesInt8:
      v = 127;
      break;
    case lanesUint8:
      v = 255;
      break;
    case lanesInt32:
    case lanesUint32:
    case lanesInt64:
    case lanesUint64:
      v = kCap;
      break;
    default: {
      int p = significandBits(t);
      v = p >= 20 ? kCap : (uint64_t{1} << p);
    }
  }
  return v < kCap ? v : kCap;
}

// Small IEEE-like formats: exponent bits, mantissa bits; e4m3 has no
// infinities (all-ones exponent still holds numbers up to 448).
struct MiniFloat {
  int expBits;
  int mantBits;
  bool hasInf;
};

inline MiniFloat miniFloatOf(lanesDataType_t t) {
  switch (t) {
    case lanesFloat16:
      return {5, 10, true};
    case lanesBfloat16:
      return {8, 7, true};
    case lanesFloat8e4m3:
      return {4, 3, false};
    default:
      return {5, 2, true};  // e5m2
  }
}

// Round-to-nearest-even encode of `v`; overflow gives inf (or e4m3's max).
inline uint32_t encodeMini(MiniFloat f, double v) {
  const uint32_t sign = std::signbit(v) ? 1u << (f.expBits + f.mantBits) : 0;
  const int bias = (1 << (f.expBits - 1)) - 1;
  const uint32_t expAllOnes = (1u << f.expBits) - 1;
  if (std::isnan(v)) return sign | (expAllOnes << f.mantBits) | ((1u << f.mantBits) - 1);
  double a = std::fabs(v);
  if (a == 0) return sign;
  int e = std::ilogb(a);
  const int emin = 1 - bias;
  uint64_t field = 0;
  if (e < emin) {  // subnormal: quantum is 2^(emin - mantBits); may round up into normals
    field = static_cast<uint64_t>(std::nearbyint(std::ldexp(a, f.mantBits - emin)));
  } else {
    auto k = static_cast<uint64_t>(std::nearbyint(std::ldexp(a, f.mantBits - e)));
    if (k == (uint64_t{2} << f.mantBits)) {
      k >>= 1;
      ++e;
    }
    field = (static_cast<uint64_t>(e + bias) << f.mantBits) | (k - (uint64_t{1} << f.mantBits));
  }
  const uint64_t maxField = f.hasInf
                                ? (uint64_t{expAllOnes} << f.mantBits)  // inf
                                : ((uint64_t{expAllOnes} << f.mantBits) | ((1u << f.mantBits) - 2));
  if (field > maxField) field = maxField;
  return sign | static_cast<uint32_t>(field);
}

inline double decodeMini(MiniFloat f, uint32_t bits) {
  const int bias = (1 << (f.expBits - 1)) - 1;
  const uint32_t expAllOnes = (1u << f.expBits) - 1;
  const uint32_t mantMask = (1u << f.mantBits) - 1;
  const bool neg = (bits >> (f.expBits + f.mantBits)) & 1;
  const uint32_t ex = (bits >> f.mantBits) & expAllOnes;
  const uint32_t m = bits & mantMask;
  double v;
  if (ex == expAllOnes && (f.hasInf || m == mantMask)) {
    v = (f.hasInf && m == 0) ? std::numeric_limits<double>::infinity()
                             : std::numeric_limits<double>::quiet_NaN();
  } else if (ex == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - bias - f.mantBits);
  } else {
    v = std::ldexp(static_cast<double>(m | (1u << f.mantBits)),
                   static_cast<int>(ex) - bias - f.mantBits);
  }
  return neg ? -v : v;
}

// Reads element `i` of a buffer of type `t` as a double.
inline double loadElement(lanesDataType_t t, const void* buf, size_t i) {
  const auto* p = static_cast<const uint8_t*>(buf) + i * elementSize(t);
  switch (t) {
    case lanesInt8: {
      int8_t v;
      std::memcpy(&v, p, 1);
      return v;
    }
    case lanesUint8:
      return *p;
    case lanesInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case lanesUint32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case lanesInt64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case lanesUint64: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case lanesFloat32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case lanesFloat64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case lanesFloat16:
    case lanesBfloat16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return decodeMini(miniFloatOf(t), v);
    }
    case lanesFloat8e4m3:
    case lanesFloat8e5m2:
      return decodeMini(miniFloatOf(t), *p);
    default:
      return std::numeric_limits<double>::quiet_NaN();
  }
}

// Writes `v` (rounded to nearest even for floats, truncated toward zero and
// wrapped for integers) as element `i`.
inline void storeElement(lanesDataType_t t, void* buf, size_t i, double v) {
  auto* p = static_cast<uint8_t*>(buf) + i * elementSize(t);
  auto asInt = [&]() -> uint64_t {  // two's complement wrap of an integer value
    return v < 0 ? static_cast<uint64_t>(-static_cast<int64_t>(-v)) : static_cast<uint64_t>(v);
  };
  switch (t) {
    case lanesInt8:
    case lanesUint8: {
      auto x = static_cast<uint8_t>(asInt());
      *p = x;
      break;
    }
    case lanesInt32:
    case lanesUint32: {
      auto x = static_cast<uint32_t>(asInt());
      std::memcpy(p, &x, 4);
      break;
    }
    case lanesInt64:
    case lanesUint64: {
      uint64_t x = asInt();
      std::memcpy(p, &x, 8);
      break;
    }
    case lanesFloat32: {
      auto x = static_cast<float>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case lanesFloat64:
      std::memcpy(p, &v, 8);
      break;
    case lanesFloat16:
    case lanesBfloat16: {
      auto x = static_cast<uint16_t>(encodeMini(miniFloatOf(t), v));
      std::memcpy(p, &x, 2);
      break;
    }
    case lanesFloat8e4m3:
    case lanesFloat8e5m2:
      *p = static_cast<uint8_t>(encodeMini(miniFloatOf(t), v));
      break;
    default:
      break;
  }
}

// The value `v` becomes when stored in type `t` (what one rounding step of a
// reduction in that type does to an exact intermediate).
inline double roundTo(lanesDataType_t t, double v) {
  uint8_t tmp[8] = {};
  storeElement(t, tmp, 0, v);
  return loadElement(t, tmp, 0);
}

}  // namespace lanes::perf
