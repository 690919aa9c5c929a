// Branch-free bit conversions between float and the narrow float formats
// (float16, bfloat16, float8 e4m3/e5m2), inline so the reduce loops
// auto-vectorise them. Every rounding is round-to-nearest-even; every NaN
// comes out canonical (0x7fff for 16-bit, 0x7f for 8-bit, as CUDA's
// conversions produce), so results never depend on a NaN's payload.
//
// No float arithmetic: a process may run with FTZ/DAZ set (fast-math objects
// do that at start-up) and the conversions must stay exact; integer selects
// also let GCC if-convert and vectorise them.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

namespace lanes::cpu::fp {

inline constexpr uint32_t kCanonicalNanF32 = 0x7fffffffu;
inline constexpr uint64_t kCanonicalNanF64 = 0x7fffffffffffffffull;

// ---- float16 (1-5-10, bias 15) ----

[[gnu::always_inline]] inline float halfToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t shifted = uint32_t(h & 0x7fffu) << 13;  // exponent+mantissa in float place
  const uint32_t exp = shifted & 0x0f800000u;
  // Normal: rebias the exponent by 127-15.
  const uint32_t normal = shifted + ((127u - 15u) << 23);
  // Inf/NaN: exponent all ones.
  const uint32_t special = shifted | 0x7f800000u;
  // Subnormal m * 2^-24: float(m) is exact, then lower its exponent by 24
  // (m == 0 gives 0 - (24 << 23) here; zero is handled by the select below).
  const uint32_t m = h & 0x3ffu;
  const uint32_t subnormal = std::bit_cast<uint32_t>(float(int32_t(m))) - (24u << 23);
  // Selected with masks: a ternary lets GCC sink the int->float conversion
  // into a branch, which it then refuses to if-convert (it may "trap").
  const uint32_t isSpecial = 0u - uint32_t(exp == 0x0f800000u);
  const uint32_t isSubnormal = 0u - uint32_t(exp == 0 && m != 0);
  const uint32_t isNormal = 0u - uint32_t(exp != 0 && exp != 0x0f800000u);
  const uint32_t mag = (special & isSpecial) | (subnormal & isSubnormal) | (normal & isNormal);
  return std::bit_cast<float>(mag | sign);
}

// |v| (float bits `mag`, below the target's smallest normal) rounded to the
// nearest multiple of 2^kQuantumExp, ties to even, as an integer count; a
// count equal to 2^mantBits is exactly the smallest normal's code. Integer
// only, so it vectorises (GCC will not speculate float ops that may trap)
// and ignores FTZ/DAZ.
template <int kQuantumExp>
[[gnu::always_inline]] inline uint32_t roundToSubnormal(uint32_t mag) {
  const uint32_t mant = (mag & 0x7fffffu) | 0x800000u;  // mag = mant * 2^(E-150)
  const int32_t shift = 150 + kQuantumExp - int32_t(mag >> 23);
  const uint32_t s = uint32_t(shift > 31 ? 31 : (shift < 1 ? 1 : shift));
  const uint32_t q = mant >> s;
  const uint32_t rem = mant & ((1u << s) - 1u);
  const uint32_t halfway = 1u << (s - 1u);
  return q + ((rem > halfway || (rem == halfway && (q & 1u) != 0)) ? 1u : 0u);
}

[[gnu::always_inline]] inline uint16_t floatToHalf(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t mag = bits & 0x7fffffffu;
  // Normal range: add the rounding bias (half-ulp minus one, plus the odd bit) and shift.
  const uint32_t odd = (mag >> 13) & 1u;
  const uint32_t normal = (mag - ((127u - 15u) << 23) + 0xfffu + odd) >> 13;
  // Below 2^-14: a multiple of 2^-24, the subnormal step.
  const uint32_t subnormal = roundToSubnormal<-24>(mag);
  uint32_t out = mag < (113u << 23) ? subnormal : normal;
  out = mag >= ((127u + 16u) << 23) ? 0x7c00u : out;  // overflow rounds to infinity
  out |= sign;
  return uint16_t(mag > 0x7f800000u ? 0x7fffu : out);
}

// ---- bfloat16 (1-8-7): the top half of a float ----

[[gnu::always_inline]] inline float bf16ToFloat(uint16_t b) {
  return std::bit_cast<float>(uint32_t(b) << 16);
}

[[gnu::always_inline]] inline uint16_t floatToBf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  return uint16_t((bits & 0x7fffffffu) > 0x7f800000u ? 0x7fffu : rounded);
}

// ---- float8: e4m3 (bias 7, max 448, no inf, NaN 0x7f/0xff) and e5m2 (bias 15, IEEE-like) ----

struct Fp8Format {
  int mantBits;
  int bias;
  uint8_t maxFinite;  // code of the largest finite value
  bool hasInf;
};
inline constexpr Fp8Format kE4m3{3, 7, 0x7e, false};
inline constexpr Fp8Format kE5m2{2, 15, 0x7b, true};

// Exact float bits of one fp8 code (constexpr, for the decode tables).
constexpr uint32_t fp8CodeToFloatBits(uint8_t code, Fp8Format f) {
  const int expBits = 7 - f.mantBits;
  const uint32_t sign = uint32_t(code & 0x80u) << 24;
  const uint32_t e = (code >> f.mantBits) & ((1u << expBits) - 1u);
  const uint32_t m = code & ((1u << f.mantBits) - 1u);
  const uint32_t expMax = (1u << expBits) - 1u;
  if (f.hasInf && e == expMax) return m == 0 ? (sign | 0x7f800000u) : kCanonicalNanF32;
  if (!f.hasInf && e == expMax && m == (1u << f.mantBits) - 1u) return kCanonicalNanF32;
  if (e != 0) return sign | ((e - f.bias + 127u) << 23) | (m << (23 - f.mantBits));
  if (m == 0) return sign;
  // Subnormal m * 2^(1-bias-mantBits): normalise around m's top bit p.
  int p = 0;
  while ((m >> (p + 1)) != 0) ++p;
  const int exp = p + 1 - f.bias - f.mantBits;
  return sign | (uint32_t(exp + 127) << 23) | ((m ^ (1u << p)) << (23 - p));
}

constexpr std::array<float, 256> makeFp8Table(Fp8Format f) {
  std::array<float, 256> t{};
  for (int c = 0; c < 256; ++c) t[c] = std::bit_cast<float>(fp8CodeToFloatBits(uint8_t(c), f));
  return t;
}
inline constexpr std::array<float, 256> kE4m3ToFloat = makeFp8Table(kE4m3);
inline constexpr std::array<float, 256> kE5m2ToFloat = makeFp8Table(kE5m2);

// fp8 -> float in integer ops, for the vector loops (a table lookup there
// becomes a slow element-by-element gather). Same values as the tables.
template <const Fp8Format& F>
[[gnu::always_inline]] inline float fp8ToFloat(uint8_t code) {
  constexpr uint32_t kExpMask = ((1u << (7 - F.mantBits)) - 1u) << F.mantBits;
  const uint32_t sign = uint32_t(code & 0x80u) << 24;
  const uint32_t em = code & 0x7fu;  // exponent and mantissa
  const uint32_t exp = em & kExpMask;
  const uint32_t normal = (em << (23 - F.mantBits)) + (uint32_t(127 - F.bias) << 23);
  // Subnormal m * 2^(1-bias-mantBits): float(m) is exact, then lower its exponent.
  const uint32_t subnormal =
      std::bit_cast<uint32_t>(float(int32_t(em))) - (uint32_t(F.bias + F.mantBits - 1) << 23);
  // Every lane computes every case and masks select (no ternaries: GCC would
  // sink the int->float conversion into a branch and not vectorise).
  const uint32_t isNan =
      0u - uint32_t(F.hasInf ? (exp == kExpMask) & (em != kExpMask) : em == 0x7fu);
  const uint32_t isInf = 0u - uint32_t(F.hasInf & (em == kExpMask));
  const uint32_t isSubnormal = 0u - uint32_t((exp == 0) & (em != 0));
  const uint32_t isNormal = ~(isNan | isInf | isSubnormal) & (0u - uint32_t(exp != 0));
  const uint32_t value =
      (subnormal & isSubnormal) | (normal & isNormal) | (0x7f800000u & isInf) | sign;
  const uint32_t out = (value & ~isNan) | (kCanonicalNanF32 & isNan);
  return std::bit_cast<float>(out);
}

// float -> fp8, round-to-nearest-even, saturating to +-max finite (CUDA's
// __NV_SATFINITE: infinities saturate too); NaN -> canonical 0x7f.
template <const Fp8Format& F>
[[gnu::always_inline]] inline uint8_t floatToFp8(float v) {
  constexpr int kShift = 23 - F.mantBits;
  constexpr uint32_t kMinNormal = uint32_t(127 + 1 - F.bias) << 23;  // 2^(1-bias)
  const uint32_t bits = std::bit_cast<uint32_t>(v);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t mag = bits & 0x7fffffffu;
  const uint32_t odd = (mag >> kShift) & 1u;
  const uint32_t normal =
      (mag - (uint32_t(127 - F.bias) << 23) + ((1u << (kShift - 1)) - 1u) + odd) >> kShift;
  const uint32_t subnormal = roundToSubnormal<1 - F.bias - F.mantBits>(mag);
  uint32_t out = mag < kMinNormal ? subnormal : normal;
  // Saturate: anything past the largest finite code (after rounding), inf included.
  out = (mag >= 0x7f800000u || out > F.maxFinite) ? F.maxFinite : out;
  out |= sign;
  return uint8_t(mag > 0x7f800000u ? 0x7fu : out);
}

}  // namespace lanes::cpu::fp
