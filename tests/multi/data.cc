#include "tests/multi/data.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tests/multi/harness.h"

namespace lanes::test {
namespace {

// IEEE-style binary formats; e4m3 (OCP FP8) has no infinities and one NaN
// mantissa pattern per sign.
struct FloatFormat {
  int expBits;
  int manBits;
  int bias;
  bool hasInf;
};
constexpr FloatFormat kHalfFormat{5, 10, 15, true};
constexpr FloatFormat kBf16Format{8, 7, 127, true};
constexpr FloatFormat kE4m3Format{4, 3, 7, false};
constexpr FloatFormat kE5m2Format{5, 2, 15, true};

double decodeBits(uint32_t bits, FloatFormat f) {
  const uint32_t sign = (bits >> (f.expBits + f.manBits)) & 1u;
  const uint32_t expMax = (1u << f.expBits) - 1;
  const uint32_t manMask = (1u << f.manBits) - 1;
  const uint32_t exp = (bits >> f.manBits) & expMax;
  const uint32_t man = bits & manMask;
  double v;
  if (f.hasInf && exp == expMax) {
    v = man != 0 ? NAN : INFINITY;
  } else if (!f.hasInf && exp == expMax && man == manMask) {
    v = NAN;
  } else if (exp == 0) {
    v = std::ldexp(static_cast<double>(man), 1 - f.bias - f.manBits);
  } else {
    v = std::ldexp(static_cast<double>((1u << f.manBits) + man),
                   static_cast<int>(exp) - f.bias - f.manBits);
  }
  return sign != 0 ? -v : v;
}

uint32_t encodeBits(double v, FloatFormat f) {
  const uint32_t signBit = (std::signbit(v) ? 1u : 0u) << (f.expBits + f.manBits);
  const uint32_t expMax = (1u << f.expBits) - 1;
  const uint32_t manMask = (1u << f.manBits) - 1;
  const uint32_t maxFinite =
      f.hasInf ? ((expMax - 1) << f.manBits) | manMask : (expMax << f.manBits) | (manMask - 1);
  if (std::isnan(v)) return signBit | (expMax << f.manBits) | manMask;
  double a = std::fabs(v);
  if (a == 0) return signBit;
  if (std::isinf(a)) return signBit | (f.hasInf ? expMax << f.manBits : maxFinite);
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int biased = e - 1 + f.bias;
  uint32_t bits;
  if (biased <= 0) {
    // Subnormal; rounding up to 2^manBits carries into the smallest normal.
    bits = static_cast<uint32_t>(std::nearbyint(std::ldexp(a, f.bias - 1 + f.manBits)));
  } else {
    auto m = static_cast<uint64_t>(std::nearbyint(std::ldexp(a, f.manBits - (e - 1))));
    if (m == (2ull << f.manBits)) {
      m >>= 1;
      ++biased;
    }
    if (biased > static_cast<int>(expMax))
      return signBit | (f.hasInf ? expMax << f.manBits : maxFinite);
    bits = (static_cast<uint32_t>(biased) << f.manBits) | (static_cast<uint32_t>(m) & manMask);
  }
  if (bits > maxFinite) bits = f.hasInf ? expMax << f.manBits : maxFinite;
  return signBit | bits;
}

uint64_t mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Largest L such that every integer in [-L, L] (or [0, L]) is exact in t.
int64_t exactLimit(lanesDataType_t t) {
  switch (t) {
    case lanesInt8:
      return 127;
    case lanesUint8:
      return 255;
    case lanesFloat16:
      return 2048;
    case lanesBfloat16:
      return 256;
    case lanesFloat8e4m3:
      return 16;
    case lanesFloat8e5m2:
      return 8;
    default:
      return 1 << 20;
  }
}

// Decode tables for the narrow floats and encode tables for the small
// integers every input is drawn from: the codec is the hot loop of filling
// and checking multi-MiB buffers.
constexpr int kEncodeRange = 2048;
struct CodecTables {
  std::vector<double> half, bf16, e4m3, e5m2;  // by bit pattern
  std::vector<uint16_t> encHalf, encBf16;      // by value + kEncodeRange
  std::vector<uint8_t> encE4m3, encE5m2;
  CodecTables() {
    for (uint32_t b = 0; b < 65536; ++b) {
      half.push_back(decodeBits(b, kHalfFormat));
      bf16.push_back(decodeBits(b, kBf16Format));
    }
    for (uint32_t b = 0; b < 256; ++b) {
      e4m3.push_back(decodeBits(b, kE4m3Format));
      e5m2.push_back(decodeBits(b, kE5m2Format));
    }
    for (int v = -kEncodeRange; v <= kEncodeRange; ++v) {
      encHalf.push_back(static_cast<uint16_t>(encodeBits(v, kHalfFormat)));
      encBf16.push_back(static_cast<uint16_t>(encodeBits(v, kBf16Format)));
      encE4m3.push_back(static_cast<uint8_t>(encodeBits(v, kE4m3Format)));
      encE5m2.push_back(static_cast<uint8_t>(encodeBits(v, kE5m2Format)));
    }
  }
};
const CodecTables& codec() {
  static const CodecTables tables;
  return tables;
}

// Encodes through the table when `v` is a small integer (always, for inputs).
template <typename Bits>
Bits encodeVia(const std::vector<Bits>& table, double v, FloatFormat f) {
  if (v >= -kEncodeRange && v <= kEncodeRange && v == std::floor(v) && !(v == 0 && std::signbit(v)))
    return table[static_cast<size_t>(static_cast<int>(v) + kEncodeRange)];
  return static_cast<Bits>(encodeBits(v, f));
}

// The input rule of one (type, reduction, nranks, salt), resolved once.
struct InputRule {
  Reduction r;
  bool sign;
  int64_t m;
  int nranks;
  uint32_t salt;
  int avgRanks = 0;

  InputRule(lanesDataType_t t, Reduction red, int n, uint32_t s)
      : r(red), sign(isSigned(t)), nranks(n), salt(s) {
    const int64_t limit = exactLimit(t);
    if (r == Reduction::Max || r == Reduction::Min) {
      m = std::min<int64_t>(limit, 100);
    } else if (r == Reduction::Avg) {
      // Inputs n*y from at most `avgRanks` ranks per index: n*sum(y) stays
      // exact, and so does each x/n, whichever the library does first.
      m = std::clamp<int64_t>(limit / (n * n), 1, 100);
      avgRanks = static_cast<int>(std::clamp<int64_t>(limit / (n * m), 1, n));
    } else {
      // Partial sums of n inputs (times the pre-multiplier 2) stay exact.
      m = std::clamp<int64_t>(limit / (2 * n), 1, 1000);
    }
  }

  double operator()(int rank, size_t index) const {
    const uint64_t h = mix(index * 0x9e3779b97f4a7c15ull ^ (static_cast<uint64_t>(rank) << 40) ^
                           (static_cast<uint64_t>(salt) << 8));
    switch (r) {
      case Reduction::Avg:
        if ((rank + index) % nranks >= static_cast<size_t>(avgRanks)) return 0;
        return static_cast<double>(nranks * static_cast<int64_t>(h % (m + 1)));
      case Reduction::Sum:
      case Reduction::PreMulSum:
      case Reduction::Max:
      case Reduction::Min:
        if (!sign) return static_cast<double>(h % (m + 1));
        return static_cast<double>(static_cast<int64_t>(h % (2 * m + 1)) - m);
      case Reduction::Prod: {
        // +-1 everywhere, 2 from at most 3 ranks (|product| <= 8), some zeros.
        if (index % 17 == 5 && static_cast<size_t>(rank) == index % nranks) return 0;
        double v = (rank < 3 && (h >> 1) % 4 == 0) ? 2 : 1;
        return (sign && (h & 1)) ? -v : v;
      }
    }
    return 0;
  }

  double expected(lanesDataType_t t, size_t index, double* sumAbs) const {
    double acc = r == Reduction::Prod ? 1 : 0;
    double absAcc = 0;
    for (int rank = 0; rank < nranks; ++rank) {
      double x = (*this)(rank, index);
      absAcc += std::fabs(x);
      switch (r) {
        case Reduction::Sum:
        case Reduction::Avg:
          acc += x;
          break;
        case Reduction::PreMulSum:
          acc += kPreMulScalar * x;
          break;
        case Reduction::Prod:
          acc *= x;
          break;
        case Reduction::Max:
          acc = rank == 0 ? x : std::max(acc, x);
          break;
        case Reduction::Min:
          acc = rank == 0 ? x : std::min(acc, x);
          break;
      }
    }
    if (r == Reduction::Avg) {
      acc /= nranks;  // exact: every input is a multiple of nranks
      absAcc /= nranks;
    }
    if (sumAbs != nullptr) *sumAbs = absAcc;
    return acc;
  }
};

}  // namespace

const char* typeName(lanesDataType_t t) {
  switch (t) {
    case lanesInt8:
      return "int8";
    case lanesUint8:
      return "uint8";
    case lanesInt32:
      return "int32";
    case lanesUint32:
      return "uint32";
    case lanesInt64:
      return "int64";
    case lanesUint64:
      return "uint64";
    case lanesFloat16:
      return "float16";
    case lanesFloat32:
      return "float32";
    case lanesFloat64:
      return "float64";
    case lanesBfloat16:
      return "bfloat16";
    case lanesFloat8e4m3:
      return "float8e4m3";
    case lanesFloat8e5m2:
      return "float8e5m2";
    default:
      return "unknown";
  }
}

const char* reductionName(Reduction r) {
  switch (r) {
    case Reduction::Sum:
      return "sum";
    case Reduction::Prod:
      return "prod";
    case Reduction::Max:
      return "max";
    case Reduction::Min:
      return "min";
    case Reduction::Avg:
      return "avg";
    case Reduction::PreMulSum:
      return "premulsum";
  }
  return "unknown";
}

size_t typeSize(lanesDataType_t t) {
  switch (t) {
    case lanesInt8:
    case lanesUint8:
    case lanesFloat8e4m3:
    case lanesFloat8e5m2:
      return 1;
    case lanesFloat16:
    case lanesBfloat16:
      return 2;
    case lanesInt32:
    case lanesUint32:
    case lanesFloat32:
      return 4;
    default:
      return 8;
  }
}

bool isFloat(lanesDataType_t t) {
  switch (t) {
    case lanesFloat16:
    case lanesFloat32:
    case lanesFloat64:
    case lanesBfloat16:
    case lanesFloat8e4m3:
    case lanesFloat8e5m2:
      return true;
    default:
      return false;
  }
}

bool isSigned(lanesDataType_t t) { return t != lanesUint8 && t != lanesUint32 && t != lanesUint64; }

double typeEpsilon(lanesDataType_t t) {
  switch (t) {
    case lanesFloat16:
      return std::ldexp(1.0, -10);
    case lanesFloat32:
      return std::ldexp(1.0, -23);
    case lanesFloat64:
      return std::ldexp(1.0, -52);
    case lanesBfloat16:
      return std::ldexp(1.0, -7);
    case lanesFloat8e4m3:
      return std::ldexp(1.0, -3);
    case lanesFloat8e5m2:
      return std::ldexp(1.0, -2);
    default:
      return 0;
  }
}

uint16_t encodeHalf(double v) { return encodeVia(codec().encHalf, v, kHalfFormat); }
uint16_t encodeBfloat16(double v) { return encodeVia(codec().encBf16, v, kBf16Format); }
uint8_t encodeE4m3(double v) { return encodeVia(codec().encE4m3, v, kE4m3Format); }
uint8_t encodeE5m2(double v) { return encodeVia(codec().encE5m2, v, kE5m2Format); }
double decodeHalf(uint16_t bits) { return codec().half[bits]; }
double decodeBfloat16(uint16_t bits) { return codec().bf16[bits]; }
double decodeE4m3(uint8_t bits) { return codec().e4m3[bits]; }
double decodeE5m2(uint8_t bits) { return codec().e5m2[bits]; }

double loadElement(lanesDataType_t t, const void* base, size_t i) {
  auto load = [&](auto tag) {
    decltype(tag) v;
    std::memcpy(&v, static_cast<const std::byte*>(base) + i * sizeof v, sizeof v);
    return v;
  };
  switch (t) {
    case lanesInt8:
      return load(int8_t{});
    case lanesUint8:
      return load(uint8_t{});
    case lanesInt32:
      return load(int32_t{});
    case lanesUint32:
      return load(uint32_t{});
    case lanesInt64:
      return static_cast<double>(load(int64_t{}));
    case lanesUint64:
      return static_cast<double>(load(uint64_t{}));
    case lanesFloat16:
      return decodeHalf(load(uint16_t{}));
    case lanesFloat32:
      return load(float{});
    case lanesFloat64:
      return load(double{});
    case lanesBfloat16:
      return decodeBfloat16(load(uint16_t{}));
    case lanesFloat8e4m3:
      return decodeE4m3(load(uint8_t{}));
    case lanesFloat8e5m2:
      return decodeE5m2(load(uint8_t{}));
    default:
      return NAN;
  }
}

void storeElement(lanesDataType_t t, void* base, size_t i, double value) {
  auto store = [&](auto v) {
    std::memcpy(static_cast<std::byte*>(base) + i * sizeof v, &v, sizeof v);
  };
  switch (t) {
    case lanesInt8:
      store(static_cast<int8_t>(value));
      break;
    case lanesUint8:
      store(static_cast<uint8_t>(value));
      break;
    case lanesInt32:
      store(static_cast<int32_t>(value));
      break;
    case lanesUint32:
      store(static_cast<uint32_t>(value));
      break;
    case lanesInt64:
      store(static_cast<int64_t>(value));
      break;
    case lanesUint64:
      store(static_cast<uint64_t>(value));
      break;
    case lanesFloat16:
      store(encodeHalf(value));
      break;
    case lanesFloat32:
      store(static_cast<float>(value));
      break;
    case lanesFloat64:
      store(value);
      break;
    case lanesBfloat16:
      store(encodeBfloat16(value));
      break;
    case lanesFloat8e4m3:
      store(encodeE4m3(value));
      break;
    case lanesFloat8e5m2:
      store(encodeE5m2(value));
      break;
    default:
      break;
  }
}

std::vector<std::byte> scalarBytes(lanesDataType_t t, double value) {
  std::vector<std::byte> out(typeSize(t));
  storeElement(t, out.data(), 0, value);
  return out;
}

double reductionInput(lanesDataType_t t, Reduction r, int rank, int nranks, size_t index,
                      uint32_t salt) {
  return InputRule(t, r, nranks, salt)(rank, index);
}

double reductionExpected(lanesDataType_t t, Reduction r, int nranks, size_t index, uint32_t salt,
                         double* sumAbs) {
  return InputRule(t, r, nranks, salt).expected(t, index, sumAbs);
}

bool reductionMatches(lanesDataType_t t, Reduction r, double got, double expected, double sumAbs) {
  if (r == Reduction::Avg && isFloat(t)) {
    // A library that multiplies by a rounded 1/n may land an ulp off; any
    // lost or doubled input moves the result by at least 1, far beyond this.
    double tol = typeEpsilon(t) * (std::fabs(expected) + sumAbs);
    return std::fabs(got - expected) <= tol;
  }
  return got == expected;
}

void fillReductionInput(lanesDataType_t t, Reduction r, int rank, int nranks, void* base,
                        size_t count, size_t firstIndex, uint32_t salt) {
  const InputRule rule(t, r, nranks, salt);
  for (size_t i = 0; i < count; ++i) storeElement(t, base, i, rule(rank, firstIndex + i));
}

std::string checkReductionOutput(lanesDataType_t t, Reduction r, int nranks, const void* base,
                                 size_t count, size_t firstIndex, uint32_t salt) {
  const InputRule rule(t, r, nranks, salt);
  size_t wrong = 0;
  std::string first;
  for (size_t i = 0; i < count; ++i) {
    double sumAbs = 0;
    double expected = rule.expected(t, firstIndex + i, &sumAbs);
    double got = loadElement(t, base, i);
    if (reductionMatches(t, r, got, expected, sumAbs)) continue;
    if (wrong++ == 0)
      first = strprintf("element %zu (logical index %zu): got %.17g, expected %.17g", i,
                        firstIndex + i, got, expected);
  }
  if (wrong == 0) return "";
  return strprintf("%s; %zu of %zu elements wrong", first.c_str(), wrong, count);
}

namespace {
uint64_t patternWord(int src, int dst, uint32_t salt, size_t word) {
  return mix((static_cast<uint64_t>(src) << 48) ^ (static_cast<uint64_t>(dst) << 32) ^ salt ^
             (word * 0xd6e8feb86659fd93ull));
}
}  // namespace

void fillPattern(void* base, size_t bytes, int src, int dst, uint32_t salt) {
  auto* p = static_cast<std::byte*>(base);
  for (size_t off = 0; off < bytes; off += 8) {
    uint64_t w = patternWord(src, dst, salt, off / 8);
    std::memcpy(p + off, &w, std::min<size_t>(8, bytes - off));
  }
}

std::string checkPattern(const void* base, size_t bytes, int src, int dst, uint32_t salt) {
  std::vector<std::byte> expected(bytes);
  fillPattern(expected.data(), bytes, src, dst, salt);
  if (bytes == 0 || std::memcmp(base, expected.data(), bytes) == 0) return "";
  const auto* p = static_cast<const uint8_t*>(base);
  size_t wrong = 0;
  size_t firstOff = 0;
  for (size_t off = 0; off < bytes; ++off) {
    if (p[off] != static_cast<uint8_t>(expected[off]) && wrong++ == 0) firstOff = off;
  }
  return strprintf(
      "byte %zu: got 0x%02x, expected 0x%02x (data from rank %d); %zu of %zu bytes "
      "wrong",
      firstOff, p[firstOff], static_cast<unsigned>(expected[firstOff]), src, wrong, bytes);
}

GuardedBuffer::GuardedBuffer(size_t bytes)
    : storage_(bytes + 2 * kGuard, kSentinel), bytes_(bytes) {}

std::string GuardedBuffer::checkGuards() const {
  for (size_t i = 0; i < kGuard; ++i) {
    if (storage_[i] != kSentinel)
      return strprintf("write before the buffer start (%zu bytes before)", kGuard - i);
    if (storage_[kGuard + bytes_ + i] != kSentinel)
      return strprintf("write past the buffer end (byte %zu after it)", i);
  }
  return "";
}

}  // namespace lanes::test
