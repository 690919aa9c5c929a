// CPU reductions against an independent scalar reference: formats decoded
// with ldexp, rounding done by searching the sorted code values (no bit
// tricks shared with the implementation), integer ops in 128-bit arithmetic.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/fp_bits.h"
#include "kernels/cpu/reduce.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace lanes::cpu {
namespace {

using ld = long double;

// ---- reference float formats ----

struct Format {
  int expBits;
  int mantBits;
  int bias;
  bool hasInf;       // IEEE-style all-ones exponent (else e4m3: only S.1111.111 is NaN)
  bool saturate;     // float->format saturates to max finite (fp8)
  uint32_t nanCode;  // canonical NaN the implementation emits
};
constexpr Format kHalf{5, 10, 15, true, false, 0x7fff};
constexpr Format kBf16{8, 7, 127, true, false, 0x7fff};
constexpr Format kE4m3{4, 3, 7, false, true, 0x7f};
constexpr Format kE5m2{5, 2, 15, true, true, 0x7f};

uint32_t signBit(const Format& f) { return 1u << (f.expBits + f.mantBits); }

bool refIsNan(const Format& f, uint32_t c) {
  const uint32_t e = (c >> f.mantBits) & ((1u << f.expBits) - 1);
  const uint32_t m = c & ((1u << f.mantBits) - 1);
  const uint32_t emax = (1u << f.expBits) - 1;
  if (f.hasInf) return e == emax && m != 0;
  return e == emax && m == (1u << f.mantBits) - 1;
}

ld refDecodeSlow(const Format& f, uint32_t c) {
  if (refIsNan(f, c)) return std::numeric_limits<ld>::quiet_NaN();
  const bool neg = (c & signBit(f)) != 0;
  const int e = int((c >> f.mantBits) & ((1u << f.expBits) - 1));
  const int m = int(c & ((1u << f.mantBits) - 1));
  ld v;
  if (f.hasInf && e == (1 << f.expBits) - 1) {
    v = std::numeric_limits<ld>::infinity();
  } else if (e == 0) {
    v = std::ldexp(ld(m), 1 - f.bias - f.mantBits);
  } else {
    v = std::ldexp(ld((1 << f.mantBits) + m), e - f.bias - f.mantBits);
  }
  return neg ? -v : v;
}

// Decoded values of every code, computed once per format (the reference is
// checked over millions of elements).
ld refDecode(const Format& f, uint32_t c) {
  static const auto build = [](const Format& fmt) {
    std::vector<ld> t(size_t(1) << (1 + fmt.expBits + fmt.mantBits));
    for (uint32_t i = 0; i < t.size(); ++i) t[i] = refDecodeSlow(fmt, i);
    return t;
  };
  static const std::vector<ld> tables[] = {build(kHalf), build(kBf16), build(kE4m3), build(kE5m2)};
  const int which = &f == &kHalf ? 0 : &f == &kBf16 ? 1 : &f == &kE4m3 ? 2 : 3;
  return tables[which][c];
}

// Largest finite positive code; codes 0..maxFinite are increasing in value.
uint32_t maxFinite(const Format& f) {
  if (f.hasInf) return (((1u << f.expBits) - 1) << f.mantBits) - 1;
  return signBit(f) - 2;
}

// Correct rounding (nearest, ties to even code) of an exact value.
uint32_t refEncode(const Format& f, ld x) {
  if (std::isnan(x)) return f.nanCode;
  const uint32_t sign = std::signbit(x) ? signBit(f) : 0;
  const ld ax = std::fabs(x);
  const uint32_t top = maxFinite(f);
  // Value of the code just past max finite, as if the exponent range went on.
  const ld beyond = refDecode(f, top) + (refDecode(f, top) - refDecode(f, top - 1));
  uint32_t code;
  if (std::isinf(ax) || ax >= beyond) {
    code = top + 1;
  } else {
    uint32_t lo = 0, hi = top + 1;  // value(lo) <= ax < value(hi)
    while (hi - lo > 1) {
      const uint32_t mid = (lo + hi) / 2;
      (refDecode(f, mid) <= ax ? lo : hi) = mid;
    }
    const ld vlo = refDecode(f, lo);
    const ld vhi = hi > top ? beyond : refDecode(f, hi);
    if (ax - vlo < vhi - ax) {
      code = lo;
    } else if (ax - vlo > vhi - ax) {
      code = hi;
    } else {
      code = (lo % 2 == 0) ? lo : hi;
    }
  }
  if (code > top) code = f.saturate ? top : top + 1;  // top + 1 is the infinity code
  return code | sign;
}

// ---- per-datatype reference ----

enum class Kind { Int, F32, F64, Narrow };

struct TypeInfo {
  lanesDataType_t type;
  const char* name;
  size_t size;
  Kind kind;
  bool isSigned = false;
  const Format* fmt = nullptr;
};

const std::vector<TypeInfo>& allTypes() {
  static const std::vector<TypeInfo> t = {
      {lanesInt8, "int8", 1, Kind::Int, true},
      {lanesUint8, "uint8", 1, Kind::Int, false},
      {lanesInt32, "int32", 4, Kind::Int, true},
      {lanesUint32, "uint32", 4, Kind::Int, false},
      {lanesInt64, "int64", 8, Kind::Int, true},
      {lanesUint64, "uint64", 8, Kind::Int, false},
      {lanesFloat16, "float16", 2, Kind::Narrow, false, &kHalf},
      {lanesFloat32, "float32", 4, Kind::F32},
      {lanesFloat64, "float64", 8, Kind::F64},
      {lanesBfloat16, "bfloat16", 2, Kind::Narrow, false, &kBf16},
      {lanesFloat8e4m3, "e4m3", 1, Kind::Narrow, false, &kE4m3},
      {lanesFloat8e5m2, "e5m2", 1, Kind::Narrow, false, &kE5m2},
  };
  return t;
}

const RedOpKind kOps[] = {RedOpKind::Sum, RedOpKind::Prod, RedOpKind::Max,
                          RedOpKind::Min, RedOpKind::Avg,  RedOpKind::PreMulSum};

uint64_t loadBits(const uint8_t* p, size_t size) {
  uint64_t v = 0;
  std::memcpy(&v, p, size);  // little-endian host
  return v;
}
void storeBits(uint8_t* p, size_t size, uint64_t v) { std::memcpy(p, &v, size); }

// Integer ops modulo 2^bits on sign- or zero-extended values.
unsigned __int128 extend(const TypeInfo& t, uint64_t bits) {
  const int nbits = int(t.size * 8);
  if (t.isSigned && nbits < 64 && (bits >> (nbits - 1)) & 1) bits |= ~0ull << nbits;
  __int128 s = t.isSigned ? __int128(int64_t(bits)) : __int128(bits);
  return (unsigned __int128)s;
}
__int128 signedValue(const TypeInfo& t, uint64_t bits) {
  return t.isSigned ? __int128(int64_t(extend(t, bits))) : __int128(bits);
}
uint64_t truncate(const TypeInfo& t, unsigned __int128 v) {
  const uint64_t mask = t.size == 8 ? ~0ull : ((1ull << (t.size * 8)) - 1);
  return uint64_t(v) & mask;
}

// Max/min on values: NaN loses to a number, two NaNs give NaN, +0 > -0.
template <class T>
T refMaxMin(T a, T b, bool isMax) {
  if (std::isnan(a) && std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  if (a == b) {
    const bool aNeg = std::signbit(a), bNeg = std::signbit(b);
    return isMax ? (aNeg && bNeg ? a : std::fabs(a)) : (aNeg || bNeg ? -std::fabs(a) : a);
  }
  return (a > b) == isMax ? a : b;
}

uint64_t canonical32(float v) { return std::isnan(v) ? 0x7fffffffu : std::bit_cast<uint32_t>(v); }
uint64_t canonical64(double v) {
  return std::isnan(v) ? 0x7fffffffffffffffull : std::bit_cast<uint64_t>(v);
}

uint64_t refCombine(const TypeInfo& t, RedOpKind op, uint64_t a, uint64_t b) {
  const bool isSum = op == RedOpKind::Sum || op == RedOpKind::Avg || op == RedOpKind::PreMulSum;
  const bool isMax = op == RedOpKind::Max;
  switch (t.kind) {
    case Kind::Int: {
      if (isSum) return truncate(t, extend(t, a) + extend(t, b));
      if (op == RedOpKind::Prod) return truncate(t, extend(t, a) * extend(t, b));
      const __int128 x = signedValue(t, a), y = signedValue(t, b);
      return (x > y) == isMax ? a : b;
    }
    case Kind::F32: {
      const float x = std::bit_cast<float>(uint32_t(a)), y = std::bit_cast<float>(uint32_t(b));
      // Exact in long double, then one rounding to float (64 >= 2*24+2 bits: no double-rounding).
      if (isSum) return canonical32(float(ld(x) + ld(y)));
      if (op == RedOpKind::Prod) return canonical32(float(ld(x) * ld(y)));
      return canonical32(refMaxMin(x, y, isMax));
    }
    case Kind::F64: {
      const double x = std::bit_cast<double>(a), y = std::bit_cast<double>(b);
      volatile double r;  // IEEE double op, the reference itself
      if (isSum) {
        r = x + y;
      } else if (op == RedOpKind::Prod) {
        r = x * y;
      } else {
        r = refMaxMin(x, y, isMax);
      }
      return canonical64(r);
    }
    case Kind::Narrow: {
      const ld x = refDecode(*t.fmt, uint32_t(a)), y = refDecode(*t.fmt, uint32_t(b));
      // Rounded at most twice (to 64 bits, then the format): 64 >= 2p+2, so as if once.
      if (isSum) return refEncode(*t.fmt, x + y);
      if (op == RedOpKind::Prod) return refEncode(*t.fmt, x * y);
      return refEncode(*t.fmt, refMaxMin(x, y, isMax));
    }
  }
  return 0;
}

// ---- random data ----

// Random bit patterns (every NaN payload, inf, -0, subnormals) for the narrow
// types and integers; float32/64 get random finite values with specials mixed in.
std::vector<uint8_t> randomBuffer(const TypeInfo& t, size_t count, std::mt19937_64& rng,
                                  size_t pad = 1) {
  std::vector<uint8_t> buf((count + pad) * t.size);
  for (size_t i = 0; i < count + pad; ++i) {
    uint64_t bits = rng();
    const unsigned pick = unsigned(rng() % 16);
    if (t.kind == Kind::F32) {
      const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1e-45f, 3.4e38f};
      float v = std::ldexp(float(int32_t(bits)) / 2147483648.0f, int(rng() % 40) - 20);
      if (pick < 4) v = specials[rng() % 8];
      if (pick == 4) v = std::bit_cast<float>(uint32_t(bits));  // any pattern
      bits = std::bit_cast<uint32_t>(v);
    } else if (t.kind == Kind::F64) {
      const double specials[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, -NAN, 5e-324, 1.7e308};
      double v = std::ldexp(double(int64_t(bits)) / 9.2e18, int(rng() % 80) - 40);
      if (pick < 4) v = specials[rng() % 8];
      if (pick == 4) v = std::bit_cast<double>(bits);
      bits = std::bit_cast<uint64_t>(v);
    } else if (t.kind == Kind::Int && pick < 3) {
      const uint64_t edges[] = {
          0, 1, ~0ull, 0x7fffffffffffffffull, 0x8000000000000000ull, 0x80, 0x7f, 0x80000000ull};
      bits = edges[rng() % 8];
    }
    storeBits(&buf[i * t.size], t.size, bits);
  }
  return buf;
}

std::string label(const TypeInfo& t, RedOpKind op, size_t count) {
  return std::string(t.name) + " " + redOpName(op) + " count=" + std::to_string(count);
}

// Checks dst against the reference; reports the first few mismatches.
void expectMatches(const TypeInfo& t, RedOpKind op, const uint8_t* dst, const uint8_t* a,
                   const uint8_t* b, size_t count, const std::string& what) {
  int failures = 0;
  for (size_t i = 0; i < count && failures < 5; ++i) {
    const uint64_t x = loadBits(a + i * t.size, t.size), y = loadBits(b + i * t.size, t.size);
    const uint64_t want = refCombine(t, op, x, y);
    const uint64_t got = loadBits(dst + i * t.size, t.size);
    if (want != got) {
      ++failures;
      ADD_FAILURE() << what << " at " << i << ": a=0x" << std::hex << x << " b=0x" << y
                    << " want 0x" << want << " got 0x" << got;
    }
  }
}

// ---- tests ----

TEST(CpuReduce, EveryTypeAndOpMatchesReference) {
  std::mt19937_64 rng(42);
  for (const TypeInfo& t : allTypes()) {
    for (RedOpKind op : kOps) {
      for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(33), size_t(1000)}) {
        // Offset every buffer by one element so nothing is vector-aligned.
        std::vector<uint8_t> a = randomBuffer(t, count, rng), b = randomBuffer(t, count, rng);
        std::vector<uint8_t> dst((count + 1) * t.size, 0xcd);
        reduce(dst.data() + t.size, a.data() + t.size, b.data() + t.size, count, t.type, op);
        expectMatches(t, op, dst.data() + t.size, a.data() + t.size, b.data() + t.size, count,
                      label(t, op, count));
        EXPECT_EQ(dst[0], 0xcd) << label(t, op, count) << ": wrote before dst";
      }
    }
  }
}

TEST(CpuReduce, LargeOddCountMatchesReference) {
  std::mt19937_64 rng(7);
  const size_t count = 1000003;
  for (const TypeInfo& t : allTypes()) {
    const std::vector<uint8_t> a = randomBuffer(t, count, rng, 0);
    const std::vector<uint8_t> b = randomBuffer(t, count, rng, 0);
    for (RedOpKind op : {RedOpKind::Sum, RedOpKind::Prod, RedOpKind::Max, RedOpKind::Min}) {
      std::vector<uint8_t> dst((count + 1) * t.size, 0xcd);
      reduce(dst.data(), a.data(), b.data(), count, t.type, op);
      expectMatches(t, op, dst.data(), a.data(), b.data(), count, label(t, op, count));
      EXPECT_EQ(dst[count * t.size], 0xcd) << label(t, op, count) << ": wrote past dst";
    }
  }
}

TEST(CpuReduce, DstMayAliasEitherInput) {
  std::mt19937_64 rng(3);
  for (const TypeInfo& t : allTypes()) {
    for (RedOpKind op : {RedOpKind::Sum, RedOpKind::Prod, RedOpKind::Max, RedOpKind::Min}) {
      for (size_t count : {size_t(7), size_t(3001)}) {
        const std::vector<uint8_t> a = randomBuffer(t, count, rng), b = randomBuffer(t, count, rng);
        std::vector<uint8_t> want(a.size());
        reduce(want.data(), a.data(), b.data(), count, t.type, op);
        expectMatches(t, op, want.data(), a.data(), b.data(), count, label(t, op, count));

        std::vector<uint8_t> inA = a;
        reduce(inA.data(), inA.data(), b.data(), count, t.type, op);
        EXPECT_EQ(0, std::memcmp(inA.data(), want.data(), count * t.size))
            << label(t, op, count) << " dst==a";
        std::vector<uint8_t> inB = b;
        reduce(inB.data(), a.data(), inB.data(), count, t.type, op);
        EXPECT_EQ(0, std::memcmp(inB.data(), want.data(), count * t.size))
            << label(t, op, count) << " dst==b";
        std::vector<uint8_t> self = a;
        reduce(self.data(), self.data(), self.data(), count, t.type, op);
        expectMatches(t, op, self.data(), a.data(), a.data(), count,
                      label(t, op, count) + " dst==a==b");
      }
    }
  }
}

TEST(CpuReduce, CommutativeBitForBit) {
  std::mt19937_64 rng(11);
  const size_t count = 4099;
  for (const TypeInfo& t : allTypes()) {
    for (RedOpKind op : {RedOpKind::Sum, RedOpKind::Prod, RedOpKind::Max, RedOpKind::Min}) {
      std::vector<uint8_t> a(count * t.size), b(count * t.size);
      for (auto& v : a) v = uint8_t(rng());  // raw bits: every NaN payload and sign
      for (auto& v : b) v = uint8_t(rng());
      std::vector<uint8_t> ab(a.size()), ba(a.size());
      reduce(ab.data(), a.data(), b.data(), count, t.type, op);
      reduce(ba.data(), b.data(), a.data(), count, t.type, op);
      EXPECT_EQ(0, std::memcmp(ab.data(), ba.data(), ab.size())) << label(t, op, count);
    }
  }
}

TEST(CpuReduce, FloatNanInfAndSignedZero) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float a[] = {nan, 1.0f, nan, -0.0f, 0.0f, -0.0f, INFINITY, INFINITY, -nan};
  const float b[] = {2.0f, nan, nan, 0.0f, -0.0f, -0.0f, -INFINITY, 1.0f, -nan};
  constexpr size_t n = 9;
  static_assert(sizeof(a) / sizeof(a[0]) == n && sizeof(b) == sizeof(a));
  float mx[n], mn[n], sum[n];
  reduce(mx, a, b, n, lanesFloat32, RedOpKind::Max);
  reduce(mn, a, b, n, lanesFloat32, RedOpKind::Min);
  reduce(sum, a, b, n, lanesFloat32, RedOpKind::Sum);
  EXPECT_EQ(mx[0], 2.0f);  // NaN loses to a number, either side
  EXPECT_EQ(mx[1], 1.0f);
  EXPECT_EQ(mn[0], 2.0f);
  EXPECT_EQ(mn[1], 1.0f);
  EXPECT_EQ(std::bit_cast<uint32_t>(mx[2]), 0x7fffffffu);  // two NaNs: canonical NaN
  EXPECT_EQ(std::bit_cast<uint32_t>(mx[8]), 0x7fffffffu);
  EXPECT_FALSE(std::signbit(mx[3]));  // max(-0, +0) = +0, in either order
  EXPECT_FALSE(std::signbit(mx[4]));
  EXPECT_TRUE(std::signbit(mx[5]));
  EXPECT_TRUE(std::signbit(mn[3]));  // min(-0, +0) = -0
  EXPECT_TRUE(std::signbit(mn[4]));
  EXPECT_EQ(std::bit_cast<uint32_t>(sum[6]), 0x7fffffffu);  // inf + -inf
  EXPECT_EQ(sum[7], INFINITY);
  EXPECT_TRUE(std::signbit(sum[5]));  // -0 + -0 = -0
  EXPECT_FALSE(std::signbit(sum[3]));

  // The same through float16 (0x7e00 = NaN, 0x8000 = -0, 0x7c00 = inf).
  const uint16_t ha[] = {0x7e00, 0x8000, 0x7c00, 0x7bff};
  const uint16_t hb[] = {0x3c00, 0x0000, 0xfc00, 0x7bff};
  uint16_t hm[4], hs[4];
  reduce(hm, ha, hb, 4, lanesFloat16, RedOpKind::Max);
  reduce(hs, ha, hb, 4, lanesFloat16, RedOpKind::Sum);
  EXPECT_EQ(hm[0], 0x3c00);
  EXPECT_EQ(hm[1], 0x0000);
  EXPECT_EQ(hs[2], 0x7fff);  // inf - inf: canonical NaN
  EXPECT_EQ(hs[3], 0x7c00);  // 65504 + 65504 overflows to inf (no saturation for half)
}

TEST(CpuReduce, Fp8Saturates) {
  EXPECT_EQ(floatToE4m3(448.0f), 0x7e);
  EXPECT_EQ(floatToE4m3(464.0f), 0x7e);  // tie between 448 and (missing) 480
  EXPECT_EQ(floatToE4m3(1e6f), 0x7e);
  EXPECT_EQ(floatToE4m3(-1e6f), 0xfe);
  EXPECT_EQ(floatToE4m3(INFINITY), 0x7e);
  EXPECT_EQ(floatToE4m3(-INFINITY), 0xfe);
  EXPECT_EQ(floatToE4m3(NAN), 0x7f);
  EXPECT_EQ(floatToE5m2(57344.0f), 0x7b);
  EXPECT_EQ(floatToE5m2(1e9f), 0x7b);
  EXPECT_EQ(floatToE5m2(-INFINITY), 0xfb);
  EXPECT_EQ(floatToE5m2(NAN), 0x7f);
  EXPECT_TRUE(std::isnan(e5m2ToFloat(0x7f)));
  EXPECT_EQ(e5m2ToFloat(0x7c), INFINITY);
  EXPECT_EQ(e4m3ToFloat(0x7e), 448.0f);
  EXPECT_TRUE(std::isnan(e4m3ToFloat(0xff)));

  const uint8_t big[] = {0x7e, 0xfe, 0x7b};  // 448, -448 (e4m3) / 57344 (e5m2)
  uint8_t out[3];
  reduce(out, big, big, 2, lanesFloat8e4m3, RedOpKind::Sum);
  EXPECT_EQ(out[0], 0x7e);
  EXPECT_EQ(out[1], 0xfe);
  reduce(out, big + 2, big + 2, 1, lanesFloat8e5m2, RedOpKind::Prod);
  EXPECT_EQ(out[0], 0x7b);
}

// Every 16-bit pattern: decode equals the reference value; decode then
// encode gives the pattern back (NaN: canonical NaN).
void checkAllPatterns(const Format& f, int bits, float (*toFloat)(uint32_t),
                      uint32_t (*fromFloat)(float)) {
  int failures = 0;
  for (uint32_t c = 0; c < (1u << bits) && failures < 10; ++c) {
    const float v = toFloat(c);
    const ld want = refDecode(f, c);
    // Saturating formats turn infinity into the largest finite value.
    const uint32_t back = f.saturate && std::isinf(want) ? (c & signBit(f)) | maxFinite(f) : c;
    if (refIsNan(f, c)) {
      if (!std::isnan(v) || fromFloat(v) != f.nanCode) {
        ++failures;
        ADD_FAILURE() << "NaN code 0x" << std::hex << c;
      }
      continue;
    }
    if (ld(v) != want || std::signbit(v) != std::signbit(want) || fromFloat(v) != back) {
      ++failures;
      ADD_FAILURE() << "code 0x" << std::hex << c << " decodes to " << v << " want " << double(want)
                    << " re-encodes to 0x" << fromFloat(v);
    }
  }
}

TEST(CpuReduce, AllHalfBf16Fp8PatternsRoundTrip) {
  checkAllPatterns(
      kHalf, 16, [](uint32_t c) { return halfToFloat(uint16_t(c)); },
      [](float v) { return uint32_t(floatToHalf(v)); });
  checkAllPatterns(
      kBf16, 16, [](uint32_t c) { return bf16ToFloat(uint16_t(c)); },
      [](float v) { return uint32_t(floatToBf16(v)); });
  checkAllPatterns(
      kE4m3, 8, [](uint32_t c) { return e4m3ToFloat(uint8_t(c)); },
      [](float v) { return uint32_t(floatToE4m3(v)); });
  checkAllPatterns(
      kE5m2, 8, [](uint32_t c) { return e5m2ToFloat(uint8_t(c)); },
      [](float v) { return uint32_t(floatToE5m2(v)); });
}

// The vector loops decode fp8 arithmetically, the exported functions by table.
TEST(CpuReduce, Fp8ArithmeticDecodeMatchesTable) {
  for (uint32_t c = 0; c < 256; ++c) {
    EXPECT_EQ(std::bit_cast<uint32_t>(fp::fp8ToFloat<fp::kE4m3>(uint8_t(c))),
              std::bit_cast<uint32_t>(e4m3ToFloat(uint8_t(c))))
        << "e4m3 0x" << std::hex << c;
    EXPECT_EQ(std::bit_cast<uint32_t>(fp::fp8ToFloat<fp::kE5m2>(uint8_t(c))),
              std::bit_cast<uint32_t>(e5m2ToFloat(uint8_t(c))))
        << "e5m2 0x" << std::hex << c;
  }
}

// float -> narrow rounding on random floats, midpoints and their neighbours.
void checkEncode(const Format& f, uint32_t (*fromFloat)(float), std::mt19937_64& rng) {
  std::vector<float> inputs;
  for (int i = 0; i < 200000; ++i) inputs.push_back(std::bit_cast<float>(uint32_t(rng())));
  for (int i = 0; i < 200000; ++i) {  // within and just past the format's range
    inputs.push_back(std::ldexp(float(int32_t(rng())) / 2147483648.0f,
                                int(rng() % (f.bias * 2 + f.mantBits + 6)) - f.bias - f.mantBits));
  }
  for (uint32_t c = 0; c < maxFinite(f); ++c) {  // exact midpoints between neighbours
    const float mid = float((refDecode(f, c) + refDecode(f, c + 1)) / 2);
    for (float v : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      inputs.push_back(v);
      inputs.push_back(-v);
    }
  }
  int failures = 0;
  for (float v : inputs) {
    const uint32_t want = refEncode(f, ld(v)), got = fromFloat(v);
    if (want != got && failures++ < 10) {
      ADD_FAILURE() << "encode " << v << " (0x" << std::hex << std::bit_cast<uint32_t>(v)
                    << ") want 0x" << want << " got 0x" << got;
    }
  }
}

TEST(CpuReduce, FloatToNarrowRoundsToNearestEven) {
  std::mt19937_64 rng(5);
  checkEncode(
      kHalf, [](float v) { return uint32_t(floatToHalf(v)); }, rng);
  checkEncode(
      kBf16, [](float v) { return uint32_t(floatToBf16(v)); }, rng);
  checkEncode(
      kE4m3, [](float v) { return uint32_t(floatToE4m3(v)); }, rng);
  checkEncode(
      kE5m2, [](float v) { return uint32_t(floatToE5m2(v)); }, rng);
}

#if defined(__SSE__)
// Flush-to-zero / denormals-are-zero, as fast-math code sets them, must not
// change the narrow conversions (they avoid float arithmetic on denormals).
TEST(CpuReduce, ConversionsIgnoreFtzDaz) {
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | 0x8040);  // FTZ | DAZ
  std::vector<uint32_t> bad;
  for (uint32_t c = 0; c < 65536; ++c) {
    if (!refIsNan(kHalf, c) && floatToHalf(halfToFloat(uint16_t(c))) != c) bad.push_back(c);
  }
  for (uint32_t c = 0; c < 256; ++c) {
    if (!refIsNan(kE4m3, c) && floatToE4m3(e4m3ToFloat(uint8_t(c))) != c) bad.push_back(c);
    const bool inf = (c & 0x7f) == 0x7c;  // saturates, checked elsewhere
    if (!refIsNan(kE5m2, c) && !inf && floatToE5m2(e5m2ToFloat(uint8_t(c))) != c) {
      bad.push_back(c);
    }
  }
  const float tiny = halfToFloat(0x0001);
  _mm_setcsr(saved);
  EXPECT_TRUE(bad.empty()) << bad.size() << " patterns changed, first 0x" << std::hex << bad[0];
  EXPECT_EQ(tiny, std::ldexp(1.0f, -24));
}
#endif

// ---- premultiply and finishAvg ----

uint64_t refScale(const TypeInfo& t, uint64_t x, double scalar) {
  switch (t.kind) {
    case Kind::Int: {
      const unsigned __int128 s = (unsigned __int128)(__int128)(int64_t)scalar;
      return truncate(t, extend(t, x) * s);
    }
    case Kind::F32:
      return canonical32(float(ld(std::bit_cast<float>(uint32_t(x))) * ld(float(scalar))));
    case Kind::F64: {
      volatile double r = std::bit_cast<double>(x) * scalar;
      return canonical64(r);
    }
    case Kind::Narrow: {
      const ld s = refDecode(*t.fmt, refEncode(*t.fmt, scalar));  // scalar in the datatype
      return refEncode(*t.fmt, refDecode(*t.fmt, uint32_t(x)) * s);
    }
  }
  return 0;
}

uint64_t refDivide(const TypeInfo& t, uint64_t x, int n) {
  switch (t.kind) {
    case Kind::Int:
      return truncate(t, (unsigned __int128)(signedValue(t, x) / n));
    case Kind::F32:
      return canonical32(float(ld(std::bit_cast<float>(uint32_t(x))) / n));
    case Kind::F64: {
      volatile double r = std::bit_cast<double>(x) / double(n);
      return canonical64(r);
    }
    case Kind::Narrow:
      return refEncode(*t.fmt, refDecode(*t.fmt, uint32_t(x)) / n);
  }
  return 0;
}

TEST(CpuReduce, PremultiplyMatchesReference) {
  std::mt19937_64 rng(13);
  for (const TypeInfo& t : allTypes()) {
    for (double scalar : {0.5, -3.0, 0.125, 7.0, 1.0 / 3.0}) {
      for (size_t count : {size_t(0), size_t(1), size_t(33), size_t(2049)}) {
        const std::vector<uint8_t> src = randomBuffer(t, count, rng);
        std::vector<uint8_t> dst(src.size()), inPlace = src;
        premultiply(dst.data() + t.size, src.data() + t.size, count, t.type, scalar);
        premultiply(inPlace.data(), inPlace.data(), count, t.type, scalar);
        int failures = 0;
        for (size_t i = 0; i < count && failures < 5; ++i) {
          const uint64_t x = loadBits(&src[(i + 1) * t.size], t.size);
          const uint64_t want = refScale(t, x, scalar);
          const uint64_t got = loadBits(&dst[(i + 1) * t.size], t.size);
          const uint64_t wantInPlace = refScale(t, loadBits(&src[i * t.size], t.size), scalar);
          if (want != got || wantInPlace != loadBits(&inPlace[i * t.size], t.size)) {
            ++failures;
            ADD_FAILURE() << t.name << " x" << scalar << " at " << i << ": x=0x" << std::hex << x
                          << " want 0x" << want << " got 0x" << got;
          }
        }
      }
    }
  }
}

TEST(CpuReduce, FinishAvgMatchesReference) {
  std::mt19937_64 rng(17);
  for (const TypeInfo& t : allTypes()) {
    for (int nranks : {2, 3, 7, 8}) {
      for (size_t count : {size_t(1), size_t(7), size_t(nranks == 3 ? 1000003 : 3001)}) {
        const std::vector<uint8_t> src = randomBuffer(t, count, rng, 0);
        std::vector<uint8_t> dst = src;
        finishAvg(dst.data(), count, t.type, nranks);
        int failures = 0;
        for (size_t i = 0; i < count && failures < 5; ++i) {
          const uint64_t x = loadBits(&src[i * t.size], t.size);
          const uint64_t want = refDivide(t, x, nranks);
          const uint64_t got = loadBits(&dst[i * t.size], t.size);
          if (want != got) {
            ++failures;
            ADD_FAILURE() << t.name << " /" << nranks << " at " << i << ": x=0x" << std::hex << x
                          << " want 0x" << want << " got 0x" << got;
          }
        }
      }
    }
  }
}

TEST(CpuReduce, IntegerWrapAndSignedExtremes) {
  const int32_t a[] = {INT32_MAX, INT32_MIN, -7, INT32_MIN};
  const int32_t b[] = {1, -1, 2, -1};
  int32_t s[4], p[4];
  reduce(s, a, b, 4, lanesInt32, RedOpKind::Sum);
  reduce(p, a, b, 4, lanesInt32, RedOpKind::Prod);
  EXPECT_EQ(s[0], INT32_MIN);
  EXPECT_EQ(s[1], INT32_MAX);
  EXPECT_EQ(p[2], -14);
  EXPECT_EQ(p[3], INT32_MIN);  // INT32_MIN * -1 wraps
  const uint8_t u[] = {200, 16};
  uint8_t us[2];
  reduce(us, u, u, 2, lanesUint8, RedOpKind::Prod);
  EXPECT_EQ(us[0], uint8_t(200 * 200));
  EXPECT_EQ(us[1], 0);
  int8_t avg[] = {-7, 7, -128};
  finishAvg(avg, 3, lanesInt8, 2);
  EXPECT_EQ(avg[0], -3);  // truncates toward zero
  EXPECT_EQ(avg[1], 3);
  EXPECT_EQ(avg[2], -64);
  int64_t big[] = {INT64_MIN + 1};
  premultiply(big, big, 1, lanesInt64, -1.0);
  EXPECT_EQ(big[0], INT64_MAX);
}

}  // namespace
}  // namespace lanes::cpu
