// CPU reduce loops and their dispatch on (datatype, op).
//
// Vectorisation: the loops are plain C++ that GCC auto-vectorises; each
// kernel is compiled three times (x86-64-v4 = AVX-512, x86-64-v3 = AVX2,
// baseline) with target_clones and the loader picks one per CPU (ifunc), so
// no extra dependency and no per-call dispatch cost. float16 alone goes
// through the F16C instructions where the CPU has them (see halfKernelF16c).
//
// Aliasing: each block of kBlockBytes is combined into a local buffer and
// then copied out, so dst may be a or b exactly without `restrict` tricks
// and the compiler needs no run-time overlap checks; fixed-size inner loops
// also vectorise at -O2 (GCC's "very cheap" cost model).
#include "reduce.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "cpu_clones.h"
#include "reduce_ops.h"

namespace lanes::cpu {
namespace {

constexpr size_t kBlockBytes = 1024;

template <class Op>
LANES_CPU_CLONES void binaryKernel(void* dstv, const void* av, const void* bv, size_t n) {
  using S = typename Op::Storage;
  constexpr size_t kBlock = kBlockBytes / sizeof(S);
  S* dst = static_cast<S*>(dstv);
  const S* a = static_cast<const S*>(av);
  const S* b = static_cast<const S*>(bv);
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    S out[kBlock];
    for (size_t j = 0; j < kBlock; ++j) out[j] = Op::apply(a[i + j], b[i + j]);
    std::memcpy(dst + i, out, sizeof(out));
  }
  for (; i < n; ++i) dst[i] = Op::apply(a[i], b[i]);
}

template <class Op>
LANES_CPU_CLONES void unaryKernel(void* dstv, const void* srcv, size_t n, Op op) {
  using S = typename Op::Storage;
  constexpr size_t kBlock = kBlockBytes / sizeof(S);
  S* dst = static_cast<S*>(dstv);
  const S* src = static_cast<const S*>(srcv);
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    S out[kBlock];
    for (size_t j = 0; j < kBlock; ++j) out[j] = op.apply(src[i + j]);
    std::memcpy(dst + i, out, sizeof(out));
  }
  for (; i < n; ++i) dst[i] = op.apply(src[i]);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
// float16 through the F16C conversion instructions (AVX2 machines and up):
// the portable bit conversions cost ~30 instructions per element each way,
// F16C one per 8. Same results: vcvtps2ph rounds to nearest even, and NaN
// is made canonical before it, as floatToHalf does.
#define LANES_CPU_HAVE_F16C 1
struct MaxVec {
  __attribute__((target("avx2,f16c"))) static __m256 apply(__m256 x, __m256 y) {
    __m256 m = _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, y, _CMP_GT_OQ));
    m = _mm256_blendv_ps(m, x, _mm256_cmp_ps(y, y, _CMP_UNORD_Q));  // a NaN y loses
    return _mm256_blendv_ps(m, _mm256_and_ps(x, y), _mm256_cmp_ps(x, y, _CMP_EQ_OQ));
  }
};
struct MinVec {
  __attribute__((target("avx2,f16c"))) static __m256 apply(__m256 x, __m256 y) {
    __m256 m = _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, y, _CMP_LT_OQ));
    m = _mm256_blendv_ps(m, x, _mm256_cmp_ps(y, y, _CMP_UNORD_Q));
    return _mm256_blendv_ps(m, _mm256_or_ps(x, y), _mm256_cmp_ps(x, y, _CMP_EQ_OQ));
  }
};
struct SumVec {
  __attribute__((target("avx2,f16c"))) static __m256 apply(__m256 x, __m256 y) {
    return _mm256_add_ps(x, y);
  }
};
struct ProdVec {
  __attribute__((target("avx2,f16c"))) static __m256 apply(__m256 x, __m256 y) {
    return _mm256_mul_ps(x, y);
  }
};

template <class Vec, class Combine>
__attribute__((target("avx2,f16c"))) void halfKernelF16c(void* dstv, const void* av, const void* bv,
                                                         size_t n) {
  uint16_t* dst = static_cast<uint16_t*>(dstv);
  const uint16_t* a = static_cast<const uint16_t*>(av);
  const uint16_t* b = static_cast<const uint16_t*>(bv);
  const __m256 canonicalNan = _mm256_castsi256_ps(_mm256_set1_epi32(int(fp::kCanonicalNanF32)));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    const __m256 y = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    __m256 r = Vec::apply(x, y);
    r = _mm256_blendv_ps(r, canonicalNan, _mm256_cmp_ps(r, r, _CMP_UNORD_Q));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < n; ++i) dst[i] = ops::FloatOp<ops::F16Codec, Combine>::apply(a[i], b[i]);
}

bool cpuHasF16c() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  }();
  return has;
}
#else
struct SumVec {};
struct ProdVec {};
struct MaxVec {};
struct MinVec {};
#endif

template <class C, class Vec, class Combine>
void combineFloat(void* dst, const void* a, const void* b, size_t n) {
#ifdef LANES_CPU_HAVE_F16C
  if constexpr (std::is_same_v<C, ops::F16Codec>) {
    if (cpuHasF16c()) return halfKernelF16c<Vec, Combine>(dst, a, b, n);
  }
#endif
  binaryKernel<ops::FloatOp<C, Combine>>(dst, a, b, n);
}

template <class C>
void reduceFloat(void* dst, const void* a, const void* b, size_t n, RedOpKind op) {
  switch (op) {
    case RedOpKind::Sum:
    case RedOpKind::Avg:
    case RedOpKind::PreMulSum:
      return combineFloat<C, SumVec, ops::SumOp>(dst, a, b, n);
    case RedOpKind::Prod:
      return combineFloat<C, ProdVec, ops::ProdOp>(dst, a, b, n);
    case RedOpKind::Max:
      return combineFloat<C, MaxVec, ops::MaxOp>(dst, a, b, n);
    case RedOpKind::Min:
      return combineFloat<C, MinVec, ops::MinOp>(dst, a, b, n);
  }
}

template <class T>
void reduceInt(void* dst, const void* a, const void* b, size_t n, RedOpKind op) {
  switch (op) {
    case RedOpKind::Sum:
    case RedOpKind::Avg:
    case RedOpKind::PreMulSum:
      return binaryKernel<ops::IntSum<T>>(dst, a, b, n);
    case RedOpKind::Prod:
      return binaryKernel<ops::IntProd<T>>(dst, a, b, n);
    case RedOpKind::Max:
      return binaryKernel<ops::IntMax<T>>(dst, a, b, n);
    case RedOpKind::Min:
      return binaryKernel<ops::IntMin<T>>(dst, a, b, n);
  }
}

// The scalar as the datatype holds it (NCCL's PreMulSum takes the scalar in
// the datatype), widened back to the compute type.
template <class C>
void premultiplyFloat(void* dst, const void* src, size_t n, double scalar) {
  using Compute = typename C::Compute;
  const Compute s = C::load(C::store(Compute(scalar)));
  unaryKernel(dst, src, n, ops::FloatScale<C>{s});
}

// double -> 64-bit two's complement pattern, saturating out-of-range values
// (and NaN -> 0) instead of the undefined conversion.
uint64_t scalarToIntBits(double scalar) {
  if (std::isnan(scalar)) return 0;
  if (scalar >= 0x1p64) return std::numeric_limits<uint64_t>::max();
  if (scalar >= 0x1p63) return uint64_t(scalar);
  if (scalar < -0x1p63) return uint64_t(std::numeric_limits<int64_t>::min());
  return uint64_t(int64_t(scalar));
}

template <class T>
void premultiplyInt(void* dst, const void* src, size_t n, double scalar) {
  unaryKernel(dst, src, n, ops::IntScale<T>{scalarToIntBits(scalar)});
}

template <class C>
void finishAvgFloat(void* dst, size_t n, int nranks) {
  unaryKernel(dst, dst, n, ops::FloatDivide<C>{typename C::Compute(nranks)});
}

template <class T>
void finishAvgInt(void* dst, size_t n, int nranks) {
  if constexpr (sizeof(T) == 8) {
    unaryKernel(dst, dst, n, ops::IntDivide<T>{T(nranks)});
  } else {
    unaryKernel(dst, dst, n, ops::IntDivideViaDouble<T>{double(nranks)});
  }
}

}  // namespace

void reduce(void* dst, const void* a, const void* b, size_t count, lanesDataType_t type,
            RedOpKind op) {
  switch (type) {
    case lanesInt8:
      return reduceInt<int8_t>(dst, a, b, count, op);
    case lanesUint8:
      return reduceInt<uint8_t>(dst, a, b, count, op);
    case lanesInt32:
      return reduceInt<int32_t>(dst, a, b, count, op);
    case lanesUint32:
      return reduceInt<uint32_t>(dst, a, b, count, op);
    case lanesInt64:
      return reduceInt<int64_t>(dst, a, b, count, op);
    case lanesUint64:
      return reduceInt<uint64_t>(dst, a, b, count, op);
    case lanesFloat16:
      return reduceFloat<ops::F16Codec>(dst, a, b, count, op);
    case lanesFloat32:
      return reduceFloat<ops::F32Codec>(dst, a, b, count, op);
    case lanesFloat64:
      return reduceFloat<ops::F64Codec>(dst, a, b, count, op);
    case lanesBfloat16:
      return reduceFloat<ops::Bf16Codec>(dst, a, b, count, op);
    case lanesFloat8e4m3:
      return reduceFloat<ops::E4m3Codec>(dst, a, b, count, op);
    case lanesFloat8e5m2:
      return reduceFloat<ops::E5m2Codec>(dst, a, b, count, op);
    default:
      return;  // the API layer rejects unknown datatypes
  }
}

void premultiply(void* dst, const void* src, size_t count, lanesDataType_t type, double scalar) {
  switch (type) {
    case lanesInt8:
      return premultiplyInt<int8_t>(dst, src, count, scalar);
    case lanesUint8:
      return premultiplyInt<uint8_t>(dst, src, count, scalar);
    case lanesInt32:
      return premultiplyInt<int32_t>(dst, src, count, scalar);
    case lanesUint32:
      return premultiplyInt<uint32_t>(dst, src, count, scalar);
    case lanesInt64:
      return premultiplyInt<int64_t>(dst, src, count, scalar);
    case lanesUint64:
      return premultiplyInt<uint64_t>(dst, src, count, scalar);
    case lanesFloat16:
      return premultiplyFloat<ops::F16Codec>(dst, src, count, scalar);
    case lanesFloat32:
      return premultiplyFloat<ops::F32Codec>(dst, src, count, scalar);
    case lanesFloat64:
      return premultiplyFloat<ops::F64Codec>(dst, src, count, scalar);
    case lanesBfloat16:
      return premultiplyFloat<ops::Bf16Codec>(dst, src, count, scalar);
    case lanesFloat8e4m3:
      return premultiplyFloat<ops::E4m3Codec>(dst, src, count, scalar);
    case lanesFloat8e5m2:
      return premultiplyFloat<ops::E5m2Codec>(dst, src, count, scalar);
    default:
      return;
  }
}

void finishAvg(void* dst, size_t count, lanesDataType_t type, int nranks) {
  if (nranks <= 1) return;  // x / 1 == x; nranks < 1 is no communicator
  switch (type) {
    case lanesInt8:
      return finishAvgInt<int8_t>(dst, count, nranks);
    case lanesUint8:
      return finishAvgInt<uint8_t>(dst, count, nranks);
    case lanesInt32:
      return finishAvgInt<int32_t>(dst, count, nranks);
    case lanesUint32:
      return finishAvgInt<uint32_t>(dst, count, nranks);
    case lanesInt64:
      return finishAvgInt<int64_t>(dst, count, nranks);
    case lanesUint64:
      return finishAvgInt<uint64_t>(dst, count, nranks);
    case lanesFloat16:
      return finishAvgFloat<ops::F16Codec>(dst, count, nranks);
    case lanesFloat32:
      return finishAvgFloat<ops::F32Codec>(dst, count, nranks);
    case lanesFloat64:
      return finishAvgFloat<ops::F64Codec>(dst, count, nranks);
    case lanesBfloat16:
      return finishAvgFloat<ops::Bf16Codec>(dst, count, nranks);
    case lanesFloat8e4m3:
      return finishAvgFloat<ops::E4m3Codec>(dst, count, nranks);
    case lanesFloat8e5m2:
      return finishAvgFloat<ops::E5m2Codec>(dst, count, nranks);
    default:
      return;
  }
}

}  // namespace lanes::cpu
