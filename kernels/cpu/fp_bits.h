// Branch-free bit conversions between float and the narrow float formats
// (float16, bfloat16, float8 e4m3/e5m2), inline so the reduce loops
// auto-vectorise them. Every rounding is round-to-nearest-even; every NaN
// comes out canonical (0x7fff for 16-bit, 0x7f for 8-bit, as CUDA's
// conversions produce), so results never depend on a NaN's payload.
//
// Why no float arithmetic on denormals: a process may run with FTZ/DAZ set
// (fast-math objects do that at start-up); the only float ops here act on
// normal floats, so the conversions stay exact either way.
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
  // Subnormal: build 2^-14 * (1 + m/2^10) and subtract 2^-14; both are normal floats.
  const float sub = std::bit_cast<float>(shifted + (113u << 23)) - std::bit_cast<float>(113u << 23);
  const uint32_t subnormal = std::bit_cast<uint32_t>(sub);
  const uint32_t mag = exp == 0x0f800000u ? special : (exp == 0 ? subnormal : normal);
  return std::bit_cast<float>(mag | sign);
}

[[gnu::always_inline]] inline uint16_t floatToHalf(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t mag = bits & 0x7fffffffu;
  // Normal range: add the rounding bias (half-ulp minus one, plus the odd bit) and shift.
  const uint32_t odd = (mag >> 13) & 1u;
  const uint32_t normal = (mag - ((127u - 15u) << 23) + 0xfffu + odd) >> 13;
  // Below 2^-14: adding 0.5 lets the FPU round to a multiple of 2^-24 (the
  // subnormal step), which then sits in the mantissa bits. Inputs below 2^-126
  // are float denormals; treating them as zero (DAZ) gives the same result.
  constexpr uint32_t kMagic = 126u << 23;  // 0.5
  const float fmag = std::bit_cast<float>(mag < (113u << 23) ? mag : 0u);
  const uint32_t subnormal = std::bit_cast<uint32_t>(fmag + std::bit_cast<float>(kMagic)) - kMagic;
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

// float -> fp8, round-to-nearest-even, saturating to +-max finite (CUDA's
// __NV_SATFINITE: infinities saturate too); NaN -> canonical 0x7f.
template <const Fp8Format& F>
[[gnu::always_inline]] inline uint8_t floatToFp8(float v) {
  constexpr int kShift = 23 - F.mantBits;
  constexpr uint32_t kMinNormal = uint32_t(127 + 1 - F.bias) << 23;  // 2^(1-bias)
  // Adding 2^(1-bias-mantBits+23) rounds |v| to a multiple of the subnormal step.
  constexpr uint32_t kMagic = uint32_t(127 + 1 - F.bias - F.mantBits + 23) << 23;
  const uint32_t bits = std::bit_cast<uint32_t>(v);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t mag = bits & 0x7fffffffu;
  const uint32_t odd = (mag >> kShift) & 1u;
  const uint32_t normal =
      (mag - (uint32_t(127 - F.bias) << 23) + ((1u << (kShift - 1)) - 1u) + odd) >> kShift;
  const float fmag = std::bit_cast<float>(mag < kMinNormal ? mag : 0u);
  const uint32_t subnormal = std::bit_cast<uint32_t>(fmag + std::bit_cast<float>(kMagic)) - kMagic;
  uint32_t out = mag < kMinNormal ? subnormal : normal;
  // Saturate: anything past the largest finite code (after rounding), inf included.
  out = (mag >= 0x7f800000u || out > F.maxFinite) ? F.maxFinite : out;
  out |= sign;
  return uint8_t(mag > 0x7f800000u ? 0x7fu : out);
}

}  // namespace lanes::cpu::fp
