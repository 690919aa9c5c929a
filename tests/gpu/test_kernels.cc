// Reduction/scale/copy kernels (kernels/cuda/reduce.h) against a CPU reference written
// here from the rules in docs/kernels.md: every datatype and op, 1-8 sources, ragged
// counts, misaligned pointers, NaN/inf/-0. Bits must match exactly, NaN included
// (op results are canonical NaNs). Skipped when no GPU is visible.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cuda/reduce.h"

namespace lanes::cuda {
namespace {

bool gpuVisible() {
  static const bool visible = [] {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  }();
  return visible;
}

class GpuKernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpuVisible()) {
      GTEST_SKIP() << "no CUDA device visible";
    }
  }
};

// ---------------------------------------------------------------------------------
// Reference number formats: decode to double exactly, encode from float with
// round-to-nearest-even (float8: saturating to the largest finite value); NaN
// encodes to the canonical code.

struct SmallFormat {
  int manBits;
  int bias;
  uint32_t signBit;
  uint32_t maxBits;  // largest finite magnitude
  uint32_t infBits;  // 0: no infinity (e4m3)
  uint32_t nanBits;  // the canonical NaN every op result uses
  bool saturate;     // overflow (and inf) to maxBits instead of inf
  double maxFinite;
};

constexpr SmallFormat kHalf{10, 15, 0x8000, 0x7bff, 0x7c00, 0x7fff, false, 65504.0};
constexpr SmallFormat kBf16{7, 127, 0x8000, 0x7f7f, 0x7f80, 0x7fff, false, 0x1.fep127};
constexpr SmallFormat kE4m3{3, 7, 0x80, 0x7e, 0, 0x7f, true, 448.0};
constexpr SmallFormat kE5m2{2, 15, 0x80, 0x7b, 0x7c, 0x7f, true, 57344.0};

int expBitsOf(const SmallFormat& f) { return f.signBit == 0x8000 ? 15 - f.manBits : 7 - f.manBits; }

double decode(const SmallFormat& f, uint32_t bits) {
  const int eb = expBitsOf(f);
  const uint32_t emax = (1u << eb) - 1;
  const bool neg = bits & f.signBit;
  const uint32_t e = (bits >> f.manBits) & emax;
  const uint32_t m = bits & ((1u << f.manBits) - 1);
  double v;
  if (f.infBits != 0 && e == emax) {
    v = m != 0 ? NAN : INFINITY;
  } else if (f.infBits == 0 && e == emax && m == (1u << f.manBits) - 1) {
    v = NAN;  // e4m3: only S.1111.111 is NaN
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - f.bias - f.manBits);
  } else {
    v = std::ldexp(static_cast<double>(m | (1u << f.manBits)),
                   static_cast<int>(e) - f.bias - f.manBits);
  }
  return neg ? -v : v;
}

uint32_t encode(const SmallFormat& f, float x) {
  const uint32_t sign = std::signbit(x) ? f.signBit : 0;
  if (std::isnan(x)) return f.nanBits;
  const double a = std::fabs(static_cast<double>(x));
  if (std::isinf(a)) return sign | (f.saturate ? f.maxBits : f.infBits);
  const int minExp = 1 - f.bias;
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const int quantumExp = std::max(e - 1, minExp) - f.manBits;
  const double r = std::nearbyint(std::ldexp(a, -quantumExp)) * std::ldexp(1.0, quantumExp);
  if (r > f.maxFinite) return sign | (f.saturate ? f.maxBits : f.infBits);
  if (r == 0) return sign;
  std::frexp(r, &e);
  const int re = e - 1;
  if (re < minExp) {
    return sign | static_cast<uint32_t>(std::ldexp(r, f.manBits - minExp));  // subnormal
  }
  const uint32_t mant = static_cast<uint32_t>(std::ldexp(r, f.manBits - re)) - (1u << f.manBits);
  return sign | (static_cast<uint32_t>(re + f.bias) << f.manBits) | mant;
}

// ---------------------------------------------------------------------------------
// Reference arithmetic on raw element bits (held in uint64_t).

enum class Kind { Int, Uint, F32, F64, Small };

struct TypeInfo {
  lanesDataType_t type;
  const char* name;
  size_t size;
  Kind kind;
  const SmallFormat* fmt;
};

const std::vector<TypeInfo>& allTypes() {
  static const std::vector<TypeInfo> types = {
      {lanesInt8, "int8", 1, Kind::Int, nullptr},
      {lanesUint8, "uint8", 1, Kind::Uint, nullptr},
      {lanesInt32, "int32", 4, Kind::Int, nullptr},
      {lanesUint32, "uint32", 4, Kind::Uint, nullptr},
      {lanesInt64, "int64", 8, Kind::Int, nullptr},
      {lanesUint64, "uint64", 8, Kind::Uint, nullptr},
      {lanesFloat16, "float16", 2, Kind::Small, &kHalf},
      {lanesFloat32, "float32", 4, Kind::F32, nullptr},
      {lanesFloat64, "float64", 8, Kind::F64, nullptr},
      {lanesBfloat16, "bfloat16", 2, Kind::Small, &kBf16},
      {lanesFloat8e4m3, "float8e4m3", 1, Kind::Small, &kE4m3},
      {lanesFloat8e5m2, "float8e5m2", 1, Kind::Small, &kE5m2},
  };
  return types;
}

const TypeInfo& infoOf(lanesDataType_t t) {
  for (const TypeInfo& i : allTypes()) {
    if (i.type == t) return i;
  }
  throw std::runtime_error("unknown datatype");
}

const char* opName(RedOpKind op) {
  switch (op) {
    case RedOpKind::Sum:
      return "sum";
    case RedOpKind::Prod:
      return "prod";
    case RedOpKind::Max:
      return "max";
    case RedOpKind::Min:
      return "min";
    case RedOpKind::Avg:
      return "avg";
    case RedOpKind::PreMulSum:
      return "premulsum";
  }
  return "unknown";
}

class Ref {
 public:
  explicit Ref(const TypeInfo& t) : t_(t) {}

  uint64_t mask() const { return t_.size == 8 ? ~0ull : (1ull << (8 * t_.size)) - 1; }
  int64_t sext(uint64_t v) const {
    const int shift = 64 - 8 * static_cast<int>(t_.size);
    return static_cast<int64_t>(v << shift) >> shift;
  }
  static float f32(uint64_t v) {
    float f;
    const uint32_t b = static_cast<uint32_t>(v);
    std::memcpy(&f, &b, 4);
    return f;
  }
  static uint64_t bits(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
  }
  static double f64(uint64_t v) {
    double d;
    std::memcpy(&d, &v, 8);
    return d;
  }
  static uint64_t bits(double d) {
    uint64_t b;
    std::memcpy(&b, &d, 8);
    return b;
  }
  // Exact value as double (floats only).
  double value(uint64_t v) const {
    switch (t_.kind) {
      case Kind::F32:
        return f32(v);
      case Kind::F64:
        return f64(v);
      case Kind::Small:
        return decode(*t_.fmt, static_cast<uint32_t>(v));
      default:
        return 0;
    }
  }
  // Every NaN an op produces is canonical: 0x7fffffff, 0x7fffffffffffffff, 0x7fff, 0x7f.
  uint64_t canon(uint64_t v) const {
    if (!isNan(v)) return v;
    switch (t_.kind) {
      case Kind::F32:
        return 0x7fffffffu;
      case Kind::F64:
        return 0x7fffffffffffffffull;
      default:
        return t_.fmt->nanBits;
    }
  }
  bool isNan(uint64_t v) const {
    return (t_.kind == Kind::F32 || t_.kind == Kind::F64 || t_.kind == Kind::Small) &&
           std::isnan(value(v));
  }
  // Exact bits: NaN results are canonical on both sides; a NaN passed through
  // untouched (one source, no op) keeps its payload on both sides.
  bool same(uint64_t a, uint64_t b) const { return a == b; }

  // A binary op in the type's arithmetic (float for 16/8-bit floats, rounded back).
  template <class F32Op, class F64Op, class IntOp>
  uint64_t arith(uint64_t a, uint64_t b, F32Op f, F64Op d, IntOp i) const {
    switch (t_.kind) {
      case Kind::Int:
      case Kind::Uint:
        return i(a, b) & mask();
      case Kind::F32:
        return canon(bits(f(f32(a), f32(b))));
      case Kind::F64:
        return canon(bits(d(f64(a), f64(b))));
      case Kind::Small: {
        const float x = static_cast<float>(value(a));
        const float y = static_cast<float>(value(b));
        return encode(*t_.fmt, f(x, y));
      }
    }
    return 0;
  }
  uint64_t add(uint64_t a, uint64_t b) const {
    return arith(
        a, b, [](float x, float y) { return x + y; }, [](double x, double y) { return x + y; },
        [](uint64_t x, uint64_t y) { return x + y; });
  }
  uint64_t mul(uint64_t a, uint64_t b) const {
    return arith(
        a, b, [](float x, float y) { return x * y; }, [](double x, double y) { return x * y; },
        [](uint64_t x, uint64_t y) { return x * y; });
  }
  uint64_t minmax(uint64_t a, uint64_t b, bool isMax) const {
    if (t_.kind == Kind::Int) {
      return (isMax ? sext(a) > sext(b) : sext(a) < sext(b)) ? a : b;
    }
    if (t_.kind == Kind::Uint) return (isMax ? a > b : a < b) ? a : b;
    // Floats: a NaN operand is ignored; -0 < +0 (AND/OR of the bit patterns).
    const double x = value(a), y = value(b);
    uint64_t r;
    if (std::isnan(x)) {
      r = canon(b);  // both NaN: canonical
    } else if (std::isnan(y)) {
      r = a;
    } else if (x != y) {
      r = (isMax ? x > y : x < y) ? a : b;
    } else {
      r = isMax ? (a & b) : (a | b);
    }
    // float8 results are re-rounded like any op result: e5m2 inf saturates.
    if (t_.kind == Kind::Small && t_.fmt->saturate) {
      r = encode(*t_.fmt, static_cast<float>(value(r)));
    }
    return r;
  }
  uint64_t combine(RedOpKind op, uint64_t a, uint64_t b) const {
    switch (op) {
      case RedOpKind::Prod:
        return mul(a, b);
      case RedOpKind::Max:
        return minmax(a, b, true);
      case RedOpKind::Min:
        return minmax(a, b, false);
      default:
        return add(a, b);
    }
  }
  uint64_t divide(uint64_t a, int d) const {
    switch (t_.kind) {
      case Kind::Int:
        return static_cast<uint64_t>(sext(a) / d) & mask();  // toward zero
      case Kind::Uint:
        return a / static_cast<uint64_t>(d);
      case Kind::F32:
        return canon(bits(f32(a) / static_cast<float>(d)));
      case Kind::F64:
        return canon(bits(f64(a) / static_cast<double>(d)));
      case Kind::Small:
        return encode(*t_.fmt, static_cast<float>(value(a)) / static_cast<float>(d));
    }
    return 0;
  }
  // The PreMulSum scalar in the element type (docs/kernels.md).
  uint64_t scalar(double v) const {
    switch (t_.kind) {
      case Kind::Int:
      case Kind::Uint:
        return (v < 0 ? static_cast<uint64_t>(static_cast<int64_t>(v)) : static_cast<uint64_t>(v)) &
               mask();
      case Kind::F32:
        return bits(static_cast<float>(v));
      case Kind::F64:
        return bits(v);
      case Kind::Small:
        return encode(*t_.fmt, static_cast<float>(v));
    }
    return 0;
  }

  std::string show(uint64_t v) const {
    char buf[96];
    if (t_.kind == Kind::Int || t_.kind == Kind::Uint) {
      std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    } else {
      std::snprintf(buf, sizeof buf, "0x%llx (%.9g)", static_cast<unsigned long long>(v), value(v));
    }
    return buf;
  }

 private:
  const TypeInfo& t_;
};

// Inputs: integers get random bits; floats mostly moderate values (so sums round
// in interesting places) plus NaN, +-inf, -0, +0, extremes and random bit patterns.
std::vector<uint64_t> makeInput(const TypeInfo& t, size_t count, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> v(count);
  const Ref ref(t);
  std::uniform_real_distribution<double> mant(0.5, 2.0);
  std::uniform_int_distribution<int> expo(-8, 8);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t r = rng();
    if (t.kind == Kind::Int || t.kind == Kind::Uint) {
      v[i] = r & ref.mask();
      continue;
    }
    const int pick = static_cast<int>(r % 64);
    double x = (rng() & 1 ? -1 : 1) * std::ldexp(mant(rng), expo(rng));
    bool rawBits = false;
    switch (pick) {
      case 0:
        x = NAN;
        break;
      case 1:
        x = INFINITY;
        break;
      case 2:
        x = -INFINITY;
        break;
      case 3:
        x = -0.0;
        break;
      case 4:
        x = 0.0;
        break;
      case 5:
        x = t.kind == Kind::Small ? t.fmt->maxFinite : 1e30;
        break;
      case 6:
        x = t.kind == Kind::Small ? -t.fmt->maxFinite : -1e30;
        break;
      case 7:
      case 8:
      case 9:
        rawBits = true;
        break;
      default:
        break;
    }
    if (rawBits) {
      v[i] = rng() & ref.mask();
    } else if (t.kind == Kind::F64) {
      v[i] = Ref::bits(x);
    } else if (t.kind == Kind::F32) {
      v[i] = Ref::bits(static_cast<float>(x));
    } else {
      v[i] = encode(*t.fmt, static_cast<float>(x));
    }
  }
  return v;
}

// ---------------------------------------------------------------------------------
// Device plumbing.

class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) {
    if (cudaMalloc(&ptr_, std::max<size_t>(bytes, 1)) != cudaSuccess) ptr_ = nullptr;
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  char* get() const { return static_cast<char*>(ptr_); }

 private:
  void* ptr_ = nullptr;
};

class Stream {
 public:
  Stream() { cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking); }
  ~Stream() { cudaStreamDestroy(s_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

std::vector<uint8_t> pack(const TypeInfo& t, const std::vector<uint64_t>& v) {
  std::vector<uint8_t> out(v.size() * t.size);
  for (size_t i = 0; i < v.size(); ++i)
    std::memcpy(&out[i * t.size], &v[i], t.size);  // little-endian
  return out;
}
uint64_t unpackAt(const TypeInfo& t, const uint8_t* p, size_t i) {
  uint64_t v = 0;
  std::memcpy(&v, p + i * t.size, t.size);
  return v;
}

struct Case {
  lanesDataType_t type;
  RedOpKind op;
  int nsrcs;
  size_t count;
  std::vector<size_t> srcOffsets;  // elements past a 256-byte aligned allocation
  size_t dstOffset;
  bool inPlace = false;  // dst is srcs[0]
  double scalar = 1.0;
  int divisor = 0;
  int premulSources = -1;
};

constexpr size_t kGuard = 16;  // elements after each range that must stay untouched
constexpr uint8_t kSentinel = 0xa5;

// Runs one launchReduce call and compares every element (and the guard bytes).
void runCase(const Case& c) {
  const TypeInfo& t = infoOf(c.type);
  const Ref ref(t);
  SCOPED_TRACE(::testing::Message()
               << t.name << " " << opName(c.op) << " nsrcs=" << c.nsrcs << " count=" << c.count
               << " dstOffset=" << c.dstOffset << " srcOffset0=" << c.srcOffsets[0]
               << (c.inPlace ? " in-place" : "") << " scalar=" << c.scalar
               << " divisor=" << c.divisor << " premulSources=" << c.premulSources);
  std::vector<std::vector<uint64_t>> in(c.nsrcs);
  std::vector<std::unique_ptr<DeviceBuffer>> bufs;
  std::vector<const void*> srcPtrs(c.nsrcs);
  for (int s = 0; s < c.nsrcs; ++s) {
    in[s] = makeInput(
        t, c.count,
        1000u * static_cast<uint32_t>(c.type) + 17u * s + static_cast<uint32_t>(c.count % 997));
    const size_t off = c.srcOffsets[s];
    bufs.push_back(std::make_unique<DeviceBuffer>((c.count + off + kGuard) * t.size));
    ASSERT_NE(bufs.back()->get(), nullptr) << "cudaMalloc failed";
    ASSERT_EQ(cudaMemset(bufs.back()->get(), kSentinel, (c.count + off + kGuard) * t.size),
              cudaSuccess);
    const std::vector<uint8_t> bytes = pack(t, in[s]);
    if (!bytes.empty()) {
      ASSERT_EQ(cudaMemcpy(bufs.back()->get() + off * t.size, bytes.data(), bytes.size(),
                           cudaMemcpyHostToDevice),
                cudaSuccess);
    }
    srcPtrs[s] = bufs.back()->get() + off * t.size;
  }
  const size_t dstTotal = (c.count + c.dstOffset + kGuard) * t.size;
  DeviceBuffer dstBuf(c.inPlace ? 0 : dstTotal);
  char* dstBase = c.inPlace ? bufs[0]->get() : dstBuf.get();
  const size_t dstOff = c.inPlace ? c.srcOffsets[0] : c.dstOffset;
  if (!c.inPlace) {
    ASSERT_EQ(cudaMemset(dstBase, kSentinel, dstTotal), cudaSuccess);
  }
  void* dst = dstBase + dstOff * t.size;

  // cudaMemset and pageable cudaMemcpy may still be in flight on the legacy stream,
  // which a non-blocking stream does not wait for.
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  Stream stream;
  ASSERT_EQ(launchReduce(dst, srcPtrs.data(), c.nsrcs, c.count, c.type, c.op, c.scalar, c.divisor,
                         stream.get(), c.premulSources),
            0);
  ASSERT_EQ(cudaStreamSynchronize(stream.get()), cudaSuccess);
  std::vector<uint8_t> out((c.count + dstOff + kGuard) * t.size);
  ASSERT_EQ(cudaMemcpy(out.data(), dstBase, out.size(), cudaMemcpyDeviceToHost), cudaSuccess);

  // Guards: bytes before and after the destination range are untouched.
  for (size_t b = 0; b < dstOff * t.size; ++b) {
    if (c.inPlace) break;
    ASSERT_EQ(out[b], kSentinel) << "byte " << b << " before the destination was written";
  }
  for (size_t b = (dstOff + c.count) * t.size; b < out.size(); ++b) {
    ASSERT_EQ(out[b], kSentinel) << "byte " << b << " after the destination was written";
  }

  const int npremul = c.premulSources < 0 || c.premulSources > c.nsrcs ? c.nsrcs : c.premulSources;
  const bool scaled = c.op == RedOpKind::PreMulSum && c.scalar != 1.0;
  const uint64_t s = ref.scalar(c.scalar);
  const uint8_t* got = out.data() + dstOff * t.size;
  int mismatches = 0;
  for (size_t i = 0; i < c.count; ++i) {
    auto pre = [&](int k) { return scaled && k < npremul ? ref.mul(in[k][i], s) : in[k][i]; };
    uint64_t acc = pre(0);
    for (int k = 1; k < c.nsrcs; ++k) acc = ref.combine(c.op, acc, pre(k));
    if (c.op == RedOpKind::Avg && c.divisor > 1) acc = ref.divide(acc, c.divisor);
    const uint64_t g = unpackAt(t, got, i);
    if (!ref.same(g, acc)) {
      std::string inputs;
      for (int k = 0; k < c.nsrcs; ++k) inputs += " " + ref.show(in[k][i]);
      ADD_FAILURE() << "element " << i << ": expected " << ref.show(acc) << ", got " << ref.show(g)
                    << "; inputs" << inputs;
      if (++mismatches == 5) return;
    }
  }
}

// ---------------------------------------------------------------------------------
// The matrix: every datatype x op, nsrcs {1,2,3,8} x count {0,1,7,4099,1M+1} x
// misalignment {0,1 element} (all pointers the same, so the vector body runs).

const RedOpKind kOps[] = {RedOpKind::Sum, RedOpKind::Prod, RedOpKind::Max,
                          RedOpKind::Min, RedOpKind::Avg,  RedOpKind::PreMulSum};

double scalarFor(const TypeInfo& t) {
  if (t.kind == Kind::Int) return -3.0;
  if (t.kind == Kind::Uint) return 3.0;
  return 0.3;  // not exact in any format: exercises the scalar's rounding
}

class ReduceMatrix : public GpuKernelTest,
                     public ::testing::WithParamInterface<std::tuple<lanesDataType_t, RedOpKind>> {
};

TEST_P(ReduceMatrix, MatchesReference) {
  const auto [type, op] = GetParam();
  const TypeInfo& t = infoOf(type);
  for (int nsrcs : {1, 2, 3, 8}) {
    for (size_t count :
         {size_t{0}, size_t{1}, size_t{7}, size_t{4096 + 3}, size_t{(1 << 20) + 1}}) {
      for (size_t mis : {size_t{0}, size_t{1}}) {
        Case c{type, op, nsrcs, count, std::vector<size_t>(nsrcs, mis), mis};
        if (op == RedOpKind::PreMulSum) c.scalar = scalarFor(t);
        if (op == RedOpKind::Avg) c.divisor = nsrcs == 1 ? 1 : nsrcs + 1;
        runCase(c);
        if (HasFatalFailure() || HasFailure()) return;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllTypesAndOps, ReduceMatrix,
    ::testing::Combine(::testing::Values(lanesInt8, lanesUint8, lanesInt32, lanesUint32, lanesInt64,
                                         lanesUint64, lanesFloat16, lanesFloat32, lanesFloat64,
                                         lanesBfloat16, lanesFloat8e4m3, lanesFloat8e5m2),
                       ::testing::ValuesIn(kOps)),
    [](const ::testing::TestParamInfo<ReduceMatrix::ParamType>& info) {
      return std::string(infoOf(std::get<0>(info.param)).name) + "_" +
             opName(std::get<1>(info.param));
    });

// ---------------------------------------------------------------------------------
// Paths the matrix does not reach.

class Kernels : public GpuKernelTest {};

TEST_F(Kernels, SourcesWithDifferentAlignmentsUseTheElementPath) {
  for (lanesDataType_t type :
       {lanesInt8, lanesFloat16, lanesFloat32, lanesFloat64, lanesBfloat16, lanesFloat8e5m2}) {
    for (RedOpKind op : {RedOpKind::Sum, RedOpKind::Max, RedOpKind::PreMulSum}) {
      Case c{type, op, 3, 4096 + 5, {0, 1, 2}, 3};
      c.scalar = 0.3;
      runCase(c);
    }
  }
}

TEST_F(Kernels, InPlaceOnFirstSource) {
  for (lanesDataType_t type : {lanesInt32, lanesFloat32, lanesBfloat16, lanesFloat8e4m3}) {
    for (size_t mis : {size_t{0}, size_t{1}}) {
      Case c{type, RedOpKind::Avg, 3, (1 << 16) + 9, {mis, mis, mis}, mis};
      c.inPlace = true;
      c.divisor = 3;
      runCase(c);
    }
  }
}

TEST_F(Kernels, PreMulSumScalesOnlyTheLeadingSources) {
  for (lanesDataType_t type : {lanesInt64, lanesFloat16, lanesFloat32, lanesBfloat16}) {
    for (int npremul : {0, 1, 2}) {
      Case c{type, RedOpKind::PreMulSum, 3, 4096 + 3, {1, 1, 1}, 1};
      c.scalar = type == lanesInt64 ? -5.0 : 0.7;
      c.premulSources = npremul;
      runCase(c);
    }
  }
}

TEST_F(Kernels, AvgWithoutDivisorIsSum) {
  Case c{lanesFloat32, RedOpKind::Avg, 2, 4099, {0, 0}, 0};
  c.divisor = 0;
  runCase(c);
}

TEST_F(Kernels, ScaleMultipliesEveryElementLikePreMulSum) {
  for (const TypeInfo& t : allTypes()) {
    SCOPED_TRACE(t.name);
    const Ref ref(t);
    const size_t count = 4096 + 7;
    const std::vector<uint64_t> in = makeInput(t, count, 99);
    const std::vector<uint8_t> bytes = pack(t, in);
    DeviceBuffer src((count + 1) * t.size), dst((count + 1) * t.size);
    ASSERT_EQ(cudaMemcpy(src.get() + t.size, bytes.data(), bytes.size(), cudaMemcpyHostToDevice),
              cudaSuccess);
    const double scalar = scalarFor(t);
    ASSERT_EQ(launchScale(dst.get() + t.size, src.get() + t.size, count, t.type, scalar, nullptr),
              0);
    std::vector<uint8_t> out(bytes.size());
    ASSERT_EQ(cudaMemcpy(out.data(), dst.get() + t.size, out.size(), cudaMemcpyDeviceToHost),
              cudaSuccess);
    const uint64_t s = ref.scalar(scalar);
    for (size_t i = 0; i < count; ++i) {
      const uint64_t want = ref.mul(in[i], s);
      const uint64_t got = unpackAt(t, out.data(), i);
      ASSERT_TRUE(ref.same(got, want))
          << "element " << i << ": " << ref.show(in[i]) << " * " << ref.show(s) << " expected "
          << ref.show(want) << ", got " << ref.show(got);
    }
  }
}

TEST_F(Kernels, CopyHandlesAnyByteAlignmentAndLength) {
  std::mt19937 rng(7);
  for (size_t bytes :
       {size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{4099}, size_t{(1 << 20) + 3}}) {
    for (size_t srcOff : {size_t{0}, size_t{1}, size_t{5}}) {
      for (size_t dstOff : {size_t{0}, size_t{1}, size_t{5}}) {
        SCOPED_TRACE(::testing::Message()
                     << bytes << " bytes, src+" << srcOff << " dst+" << dstOff);
        std::vector<uint8_t> in(bytes);
        for (auto& b : in) b = static_cast<uint8_t>(rng());
        DeviceBuffer src(bytes + 32), dst(bytes + 32);
        ASSERT_EQ(cudaMemset(dst.get(), kSentinel, bytes + 32), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(src.get() + srcOff, in.data(), bytes, cudaMemcpyHostToDevice),
                  cudaSuccess);
        ASSERT_EQ(launchCopy(dst.get() + dstOff, src.get() + srcOff, bytes, nullptr), 0);
        std::vector<uint8_t> out(bytes + 32);
        ASSERT_EQ(cudaMemcpy(out.data(), dst.get(), out.size(), cudaMemcpyDeviceToHost),
                  cudaSuccess);
        for (size_t i = 0; i < out.size(); ++i) {
          const bool inside = i >= dstOff && i < dstOff + bytes;
          ASSERT_EQ(out[i], inside ? in[i - dstOff] : kSentinel) << "byte " << i;
        }
      }
    }
  }
}

TEST_F(Kernels, RejectsBadArguments) {
  DeviceBuffer a(64), b(64);
  const void* srcs[9] = {a.get(), a.get(), a.get(), a.get(), a.get(),
                         a.get(), a.get(), a.get(), a.get()};
  EXPECT_EQ(launchReduce(b.get(), srcs, 0, 4, lanesFloat32, RedOpKind::Sum, 1, 0, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(launchReduce(b.get(), srcs, 9, 4, lanesFloat32, RedOpKind::Sum, 1, 0, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(launchReduce(b.get(), srcs, 2, 4, lanesNumTypes, RedOpKind::Sum, 1, 0, nullptr),
            cudaErrorInvalidValue);
  // A float pointer that is not 4-byte aligned.
  EXPECT_EQ(launchReduce(b.get() + 2, srcs, 2, 4, lanesFloat32, RedOpKind::Sum, 1, 0, nullptr),
            cudaErrorInvalidValue);
  const void* nullSrcs[2] = {a.get(), nullptr};
  EXPECT_EQ(launchReduce(b.get(), nullSrcs, 2, 4, lanesFloat32, RedOpKind::Sum, 1, 0, nullptr),
            cudaErrorInvalidValue);
  // count == 0 enqueues nothing, whatever the pointers.
  EXPECT_EQ(launchReduce(nullptr, nullSrcs, 2, 0, lanesFloat32, RedOpKind::Sum, 1, 0, nullptr),
            cudaSuccess);
}

// The reference formats themselves, on values whose encodings are known.
TEST_F(Kernels, ReferenceConversionsKnownValues) {
  EXPECT_EQ(encode(kHalf, 1.0f), 0x3c00u);
  EXPECT_EQ(encode(kHalf, 65520.0f), 0x7c00u);        // rounds to inf
  EXPECT_EQ(encode(kHalf, 0x1p-24f), 0x0001u);        // smallest subnormal
  EXPECT_EQ(encode(kBf16, 1.0f + 0x1p-8f), 0x3f80u);  // tie to even
  EXPECT_EQ(encode(kE4m3, 1000.0f), 0x7eu);           // saturates to 448
  EXPECT_EQ(encode(kE4m3, -INFINITY), 0xfeu);
  EXPECT_EQ(encode(kE5m2, INFINITY), 0x7bu);  // satfinite: inf -> 57344
  EXPECT_EQ(decode(kE4m3, 0x7e), 448.0);
  EXPECT_TRUE(std::isnan(decode(kE4m3, 0x7f)));
  EXPECT_EQ(decode(kE5m2, 0x01), 0x1p-16);
}

}  // namespace
}  // namespace lanes::cuda
