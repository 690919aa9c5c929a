// Element arithmetic of the device reductions, shared by every kernel that
// reduces (reduce.cu, ll_allreduce.cu) so they round alike, bit for bit.
// The rules and NCCL's corresponding code are described at the top of
// reduce.cu and in docs/kernels.md. Include from .cu files only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "base/datatype.h"
#include "lanes/lanes.h"

namespace lanes::cuda {

// Raw storage of the formats CUDA represents as classes; kernels only move bits
// and convert explicitly, which keeps every rounding visible.
struct Half {
  uint16_t bits;
};
struct Bf16 {
  uint16_t bits;
};
struct E4m3 {
  uint8_t bits;
};
struct E5m2 {
  uint8_t bits;
};

// ---- float max/min with NCCL's NaN handling and a fixed order of signed zeros ----

__device__ __forceinline__ uint32_t bitsOf(float x) { return __float_as_uint(x); }
__device__ __forceinline__ uint64_t bitsOf(double x) {
  return static_cast<uint64_t>(__double_as_longlong(x));
}

// Returns whichever of a/b (storage) is larger (kMax) or smaller by their values x/y.
// A NaN operand loses; two NaNs give `nan` (canonical). Equal values: bitwise AND
// (max) / OR (min) of the storages, which picks +0 / -0 for a pair of opposite
// zeros and is the identity otherwise, so the result never depends on the order.
template <bool kMax, class S, class V, class Bits>
__device__ __forceinline__ S pickMinMax(S a, S b, V x, V y, Bits abits, Bits bbits, S nan) {
  if (x != x) return y != y ? nan : b;
  if (y != y) return a;
  if (kMax ? x > y : x < y) return a;
  if (kMax ? y > x : y < x) return b;
  S r;
  Bits m = kMax ? (abits & bbits) : (abits | bbits);
  static_assert(sizeof(S) == sizeof(Bits));
  memcpy(&r, &m, sizeof(r));
  return r;
}

// ---- per-type arithmetic ----

template <class T, class Enable = void>
struct Num;

// double -> 64-bit two's complement pattern: truncation toward zero, saturating
// out-of-range values and NaN -> 0 (same as kernels/cpu's scalarToIntBits).
inline uint64_t scalarToIntBits(double v) {
  if (v != v) return 0;
  if (v >= 0x1p64) return ~uint64_t{0};
  if (v >= 0x1p63) return static_cast<uint64_t>(v);
  if (v < -0x1p63) return uint64_t{1} << 63;
  return static_cast<uint64_t>(static_cast<int64_t>(v));
}

// Integers: wrap modulo 2^bits (computed unsigned, so signed overflow is defined).
template <class T>
struct Num<T, std::enable_if_t<std::is_integral_v<T>>> {
  using U = std::make_unsigned_t<T>;
  __device__ static T add(T a, T b) {
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  }
  __device__ static T mul(T a, T b) {
    // uint8 operands promote to int; the product of two bytes fits, then wraps on the cast.
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  }
  __device__ static T max(T a, T b) { return a > b ? a : b; }
  __device__ static T min(T a, T b) { return a < b ? a : b; }
  __device__ static T div(T a, int d) {
    if constexpr (std::is_signed_v<T>) {
      return static_cast<T>(static_cast<int64_t>(a) / d);  // truncates toward zero
    } else {
      return static_cast<T>(static_cast<uint64_t>(a) / static_cast<uint64_t>(d));
    }
  }
  // The low bits of the 64-bit pattern: x * s wraps the same modulo 2^bits.
  static T fromScalar(double v) { return static_cast<T>(scalarToIntBits(v)); }
};

// float/double: IEEE ops (the _rn intrinsics are never contracted into FMAs);
// every NaN result is the canonical NaN.
template <>
struct Num<float> {
  __device__ static float nan() { return __uint_as_float(0x7fffffffu); }
  __device__ static float canon(float r) { return r != r ? nan() : r; }
  __device__ static float add(float a, float b) { return canon(__fadd_rn(a, b)); }
  __device__ static float mul(float a, float b) { return canon(__fmul_rn(a, b)); }
  __device__ static float max(float a, float b) {
    return pickMinMax<true>(a, b, a, b, bitsOf(a), bitsOf(b), nan());
  }
  __device__ static float min(float a, float b) {
    return pickMinMax<false>(a, b, a, b, bitsOf(a), bitsOf(b), nan());
  }
  __device__ static float div(float a, int d) { return canon(__fdiv_rn(a, static_cast<float>(d))); }
  static float fromScalar(double v) { return static_cast<float>(v); }
};

template <>
struct Num<double> {
  __device__ static double nan() { return __longlong_as_double(0x7fffffffffffffffll); }
  __device__ static double canon(double r) { return r != r ? nan() : r; }
  __device__ static double add(double a, double b) { return canon(__dadd_rn(a, b)); }
  __device__ static double mul(double a, double b) { return canon(__dmul_rn(a, b)); }
  __device__ static double max(double a, double b) {
    return pickMinMax<true>(a, b, a, b, bitsOf(a), bitsOf(b), nan());
  }
  __device__ static double min(double a, double b) {
    return pickMinMax<false>(a, b, a, b, bitsOf(a), bitsOf(b), nan());
  }
  __device__ static double div(double a, int d) {
    return canon(__ddiv_rn(a, static_cast<double>(d)));
  }
  static double fromScalar(double v) { return v; }
};

// Exact widening to float and round-to-nearest-even narrowing per 16/8-bit format;
// NaN narrows to the canonical code whatever the architecture's cvt would give.
template <class S>
struct Narrow;
template <>
struct Narrow<Half> {
  static constexpr Half kNan{0x7fff};
  __device__ static float toFloat(Half h) { return __half2float(__ushort_as_half(h.bits)); }
  __device__ static Half fromFloat(float f) {
    return f != f ? kNan : Half{__half_as_ushort(__float2half_rn(f))};
  }
  static Half fromFloatHost(float f) {
    return f != f ? kNan : Half{__half_raw(__float2half_rn(f)).x};
  }
};
template <>
struct Narrow<Bf16> {
  static constexpr Bf16 kNan{0x7fff};
  __device__ static float toFloat(Bf16 b) {
    return __uint_as_float(static_cast<uint32_t>(b.bits) << 16);
  }
  __device__ static Bf16 fromFloat(float f) {
    return f != f ? kNan : Bf16{__bfloat16_as_ushort(__float2bfloat16_rn(f))};
  }
  static Bf16 fromFloatHost(float f) {
    return f != f ? kNan : Bf16{__nv_bfloat16_raw(__float2bfloat16_rn(f)).x};
  }
};
// float8: __NV_SATFINITE as NCCL's __nv_fp8_e4m3/e5m2 constructors use: a finite
// overflow or an infinity becomes the largest finite value of that sign.
template <__nv_fp8_interpretation_t kKind, class S>
struct NarrowFp8 {
  static constexpr S kNan{0x7f};
  __device__ static float toFloat(S v) {
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(v.bits, kKind)));
  }
  __host__ __device__ static S fromFloat(float f) {
    return f != f ? kNan : S{__nv_cvt_float_to_fp8(f, __NV_SATFINITE, kKind)};
  }
  static S fromFloatHost(float f) { return fromFloat(f); }
};
template <>
struct Narrow<E4m3> : NarrowFp8<__NV_E4M3, E4m3> {};
template <>
struct Narrow<E5m2> : NarrowFp8<__NV_E5M2, E5m2> {};

// 16- and 8-bit floats: one op in float, rounded back at once (NCCL's per-op rounding).
template <class S>
struct Num<S, std::enable_if_t<std::is_class_v<S>>> {
  using N = Narrow<S>;
  __device__ static S add(S a, S b) {
    return N::fromFloat(__fadd_rn(N::toFloat(a), N::toFloat(b)));
  }
  __device__ static S mul(S a, S b) {
    return N::fromFloat(__fmul_rn(N::toFloat(a), N::toFloat(b)));
  }
  __device__ static S max(S a, S b) {
    return rounded(pickMinMax<true>(a, b, N::toFloat(a), N::toFloat(b), a.bits, b.bits, N::kNan));
  }
  __device__ static S min(S a, S b) {
    return rounded(pickMinMax<false>(a, b, N::toFloat(a), N::toFloat(b), a.bits, b.bits, N::kNan));
  }
  // The chosen operand is rounded back like any op result; that only changes float8
  // e5m2's infinities, which saturate to +-57344 (NCCL: __nv_fp8_e5m2(__hmax(..))).
  __device__ static S rounded(S x) {
    if constexpr (sizeof(S) == 1) return N::fromFloat(N::toFloat(x));
    return x;
  }
  __device__ static S div(S a, int d) {
    return N::fromFloat(__fdiv_rn(N::toFloat(a), static_cast<float>(d)));
  }
  // double -> float -> type, each rounding to nearest even.
  static S fromScalar(double v) { return N::fromFloatHost(static_cast<float>(v)); }
};

enum class Fn { Sum, Prod, Max, Min };

template <class S, Fn F>
__device__ __forceinline__ S combine(S a, S b) {
  if constexpr (F == Fn::Sum) return Num<S>::add(a, b);
  if constexpr (F == Fn::Prod) return Num<S>::mul(a, b);
  if constexpr (F == Fn::Max) return Num<S>::max(a, b);
  if constexpr (F == Fn::Min) return Num<S>::min(a, b);
}

// Calls f(TypeTag<S>{}) for every element type Lanes reduces, in lanesDataType_t
// order, and returns the first non-zero result (a cudaError_t), else 0.
template <class T>
struct TypeTag {
  using type = T;
};
template <class F>
int forEachElementType(F f) {
  for (int rc :
       {f(TypeTag<int8_t>{}), f(TypeTag<uint8_t>{}), f(TypeTag<int32_t>{}), f(TypeTag<uint32_t>{}),
        f(TypeTag<int64_t>{}), f(TypeTag<uint64_t>{}), f(TypeTag<Half>{}), f(TypeTag<float>{}),
        f(TypeTag<double>{}), f(TypeTag<Bf16>{}), f(TypeTag<E4m3>{}), f(TypeTag<E5m2>{})}) {
    if (rc != 0) return rc;
  }
  return 0;
}

// Calls f(TypeTag<S>{}) for the element type of `type` and returns its result;
// cudaErrorInvalidValue (1) for a type Lanes does not reduce.
template <class F>
int withElementType(lanesDataType_t type, F f) {
  switch (type) {
    case lanesInt8:
      return f(TypeTag<int8_t>{});
    case lanesUint8:
      return f(TypeTag<uint8_t>{});
    case lanesInt32:
      return f(TypeTag<int32_t>{});
    case lanesUint32:
      return f(TypeTag<uint32_t>{});
    case lanesInt64:
      return f(TypeTag<int64_t>{});
    case lanesUint64:
      return f(TypeTag<uint64_t>{});
    case lanesFloat16:
      return f(TypeTag<Half>{});
    case lanesFloat32:
      return f(TypeTag<float>{});
    case lanesFloat64:
      return f(TypeTag<double>{});
    case lanesBfloat16:
      return f(TypeTag<Bf16>{});
    case lanesFloat8e4m3:
      return f(TypeTag<E4m3>{});
    case lanesFloat8e5m2:
      return f(TypeTag<E5m2>{});
    default:
      return cudaErrorInvalidValue;
  }
}

// How a kernel that takes the op at run time applies it: Avg sums and divides
// the result by the rank count once; PreMulSum sums inputs scaled by this
// rank's scalar (x * 1 is exact: skipped, as reduce.cu does).
struct OpPlan {
  Fn fn = Fn::Sum;
  bool premul = false;
  bool avg = false;
};
inline bool planOp(RedOpKind kind, double premulScalar, OpPlan* out) {
  switch (kind) {
    case RedOpKind::Sum:
      *out = {Fn::Sum, false, false};
      return true;
    case RedOpKind::Prod:
      *out = {Fn::Prod, false, false};
      return true;
    case RedOpKind::Max:
      *out = {Fn::Max, false, false};
      return true;
    case RedOpKind::Min:
      *out = {Fn::Min, false, false};
      return true;
    case RedOpKind::Avg:
      *out = {Fn::Sum, false, true};
      return true;
    case RedOpKind::PreMulSum:
      *out = {Fn::Sum, premulScalar != 1.0, false};
      return true;
  }
  return false;
}

}  // namespace lanes::cuda
