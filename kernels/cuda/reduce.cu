// Reduction, scale and copy kernels over device memory (interface: reduce.h, rules:
// docs/kernels.md).
//
// Arithmetic follows NCCL's src/device/reduce_kernel.h (read at NVIDIA/nccl master):
//  - FuncSum/FuncProd on half and bfloat16 use __hadd/__hmul (one IEEE op in the
//    16-bit type; on older archs __float2half(__half2float(x) + __half2float(y))), and
//    on float8 (sm_90) __nv_fp8_e4m3(__hadd(__half(x), __half(y))): each binary op is
//    rounded back to the element type at once. We widen to float, do the op in float
//    and round back. That gives the same bits: float's 24-bit significand is at least
//    2p+2 for p = 11 (half), 8 (bf16), 4 and 3 (fp8), so rounding first to float and
//    then to the type equals rounding once (+, *, / are all covered), and the float8
//    constructors round with __NV_SATFINITE, where an overflow (even one that became
//    inf in half) lands on the largest finite value either way.
//  - FuncMinMax on float/double is fminf/fmaxf (fmin/fmax), on half/bf16 (sm_80) and
//    float8 (sm_90, through half) __hmin/__hmax: a NaN operand is ignored, the result
//    is NaN only when both are. Zeros of opposite sign compare equal there, and which
//    one the hardware returns is not documented, so we pin it: -0 < +0.
//  - FuncPreMulSum multiplies each input by a scalar held in the element type before
//    summing; FuncSumPostDiv (integer avg) divides the sum truncating toward zero.
//  - Beyond NCCL: every NaN an op produces is made canonical (the hardware's cvt and
//    minmax differ across architectures), so results match kernels/cpu bit for bit
//    and op(a, b) == op(b, a) exactly, which recursive doubling relies on.
//
// Memory access: the body moves 16-byte vectors (uint4) with a grid-stride loop,
// kUnroll vectors per thread per source in flight; head and tail elements (pointers
// not 16-byte aligned, ragged counts) and any call whose pointers disagree on their
// offset modulo 16 go element by element.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/reduce.h"

namespace lanes::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kBlocksPerSm = 2;  // 1024 threads/SM, up to 64 registers each
constexpr size_t kVecBytes = 16;

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
uint64_t scalarToIntBits(double v) {
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

// ---- the kernel ----

enum class Fn { Sum, Prod, Max, Min };

template <class S, Fn F>
__device__ __forceinline__ S combine(S a, S b) {
  if constexpr (F == Fn::Sum) return Num<S>::add(a, b);
  if constexpr (F == Fn::Prod) return Num<S>::mul(a, b);
  if constexpr (F == Fn::Max) return Num<S>::max(a, b);
  if constexpr (F == Fn::Min) return Num<S>::min(a, b);
}

template <class S>
struct ReduceArgs {
  S* dst;
  const S* srcs[kMaxReduceSources];
  int nsrcs;
  int npremul;  // kScaled: sources [0, npremul) are multiplied by `scalar`
  int divisor;  // kScaled: > 0 divides the result
  S scalar;
  size_t count;
  size_t head;  // leading elements before the 16-byte aligned body (element-wise)
  size_t nvec;  // 16-byte vectors in the body; the rest after it is the tail
};

// 16-byte vectors per thread per source per iteration: 4 keeps enough bytes in
// flight; float8, whose conversions take many registers, would spill at 4.
template <class S>
constexpr int kUnrollOf = std::is_class_v<S> && sizeof(S) == 1 ? 2 : 4;

// srcs[s] for a run-time s >= 1 without indexing the parameter array dynamically,
// which would copy the whole argument block to local memory.
template <class S>
__device__ __forceinline__ const S* sourceAt(const ReduceArgs<S>& a, int s) {
  const S* p = a.srcs[1];
#pragma unroll
  for (int k = 2; k < kMaxReduceSources; ++k) p = s == k ? a.srcs[k] : p;
  return p;
}

template <class S>
union Pack {
  uint4 v;
  S e[kVecBytes / sizeof(S)];
};

template <class S, bool kScaled>
__device__ __forceinline__ S pre(const ReduceArgs<S>& a, S x, int s) {
  if constexpr (kScaled) {
    if (s < a.npremul) return Num<S>::mul(x, a.scalar);
  }
  return x;
}
template <class S, bool kScaled>
__device__ __forceinline__ S post(const ReduceArgs<S>& a, S x) {
  if constexpr (kScaled) {
    if (a.divisor > 0) return Num<S>::div(x, a.divisor);
  }
  return x;
}

template <class S, Fn F, bool kScaled>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) reduceKernel(const ReduceArgs<S> a) {
  constexpr int kElems = kVecBytes / sizeof(S);
  constexpr int kUnroll = kUnrollOf<S>;
  const size_t nthreads = static_cast<size_t>(gridDim.x) * blockDim.x;

  // Aligned body: each thread owns vectors base + u*blockDim.x, coalesced per warp.
  uint4* dstv = reinterpret_cast<uint4*>(a.dst + a.head);
  for (size_t base = static_cast<size_t>(blockIdx.x) * blockDim.x * kUnroll + threadIdx.x;
       base < a.nvec; base += nthreads * kUnroll) {
    Pack<S> acc[kUnroll];
    const uint4* s0 = reinterpret_cast<const uint4*>(a.srcs[0] + a.head);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t i = base + static_cast<size_t>(u) * blockDim.x;
      acc[u].v = i < a.nvec ? s0[i] : make_uint4(0, 0, 0, 0);
    }
    if constexpr (kScaled) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int e = 0; e < kElems; ++e) acc[u].e[e] = pre<S, kScaled>(a, acc[u].e[e], 0);
    }
#pragma unroll 1
    for (int s = 1; s < a.nsrcs; ++s) {
      const uint4* sp = reinterpret_cast<const uint4*>(sourceAt(a, s) + a.head);
      Pack<S> in[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const size_t i = base + static_cast<size_t>(u) * blockDim.x;
        in[u].v = i < a.nvec ? sp[i] : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int e = 0; e < kElems; ++e)
          acc[u].e[e] = combine<S, F>(acc[u].e[e], pre<S, kScaled>(a, in[u].e[e], s));
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t i = base + static_cast<size_t>(u) * blockDim.x;
      if constexpr (kScaled) {
#pragma unroll
        for (int e = 0; e < kElems; ++e) acc[u].e[e] = post<S, kScaled>(a, acc[u].e[e]);
      }
      if (i < a.nvec) dstv[i] = acc[u].v;
    }
  }

  // Head and tail (or everything, when the pointers' alignments disagree).
  const size_t tailStart = a.head + a.nvec * kElems;
  const size_t nscalar = a.head + (a.count - tailStart);
  for (size_t j = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < nscalar;
       j += nthreads) {
    const size_t i = j < a.head ? j : tailStart + (j - a.head);
    S acc = pre<S, kScaled>(a, a.srcs[0][i], 0);
#pragma unroll 1
    for (int s = 1; s < a.nsrcs; ++s) {
      acc = combine<S, F>(acc, pre<S, kScaled>(a, sourceAt(a, s)[i], s));
    }
    a.dst[i] = post<S, kScaled>(a, acc);
  }
}

// ---- host side ----

size_t divUp(size_t a, size_t b) { return (a + b - 1) / b; }

template <class S, Fn F, bool kScaled>
int launchTyped(void* dst, const void* const* srcs, int nsrcs, size_t count, S scalar, int npremul,
                int divisor, cudaStream_t stream) {
  ReduceArgs<S> a{};
  a.dst = static_cast<S*>(dst);
  a.nsrcs = nsrcs;
  a.npremul = npremul;
  a.divisor = divisor;
  a.scalar = scalar;
  a.count = count;
  // The vector body needs every pointer at the same offset within 16 bytes; the
  // head then brings them all to a boundary together.
  const uintptr_t offset = reinterpret_cast<uintptr_t>(dst) % kVecBytes;
  bool together = true;
  for (int s = 0; s < nsrcs; ++s) {
    if (reinterpret_cast<uintptr_t>(srcs[s]) % sizeof(S) != 0) return cudaErrorInvalidValue;
    a.srcs[s] = static_cast<const S*>(srcs[s]);
    together = together && reinterpret_cast<uintptr_t>(srcs[s]) % kVecBytes == offset;
  }
  if (offset % sizeof(S) != 0) return cudaErrorInvalidValue;
  constexpr size_t kElems = kVecBytes / sizeof(S);
  if (together) {
    a.head = std::min(count, ((kVecBytes - offset) % kVecBytes) / sizeof(S));
    a.nvec = (count - a.head) / kElems;
  } else {
    a.head = count;
    a.nvec = 0;
  }
  const size_t nscalar = count - a.nvec * kElems;

  int device = 0;
  int sms = 0;
  if (cudaError_t err = cudaGetDevice(&device); err != cudaSuccess) return err;
  if (cudaError_t err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
      err != cudaSuccess) {
    return err;
  }
  const size_t perThread = std::max(divUp(a.nvec, kUnrollOf<S>), nscalar);
  const size_t blocks =
      std::clamp<size_t>(divUp(perThread, kThreads), 1, static_cast<size_t>(sms) * kBlocksPerSm);
  reduceKernel<S, F, kScaled><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

struct Call {
  void* dst;
  const void* const* srcs;
  int nsrcs;
  size_t count;
  RedOpKind op;
  double scalar;
  int divisor;
  int npremul;
  cudaStream_t stream;
};

template <class S>
int dispatchOp(const Call& c) {
  const S none{};
  switch (c.op) {
    case RedOpKind::Sum:
      return launchTyped<S, Fn::Sum, false>(c.dst, c.srcs, c.nsrcs, c.count, none, 0, 0, c.stream);
    case RedOpKind::Prod:
      return launchTyped<S, Fn::Prod, false>(c.dst, c.srcs, c.nsrcs, c.count, none, 0, 0, c.stream);
    case RedOpKind::Max:
      return launchTyped<S, Fn::Max, false>(c.dst, c.srcs, c.nsrcs, c.count, none, 0, 0, c.stream);
    case RedOpKind::Min:
      return launchTyped<S, Fn::Min, false>(c.dst, c.srcs, c.nsrcs, c.count, none, 0, 0, c.stream);
    case RedOpKind::Avg:
      if (c.divisor <= 1) {  // x / 1 == x; kernels/cpu finishAvg skips it too
        return launchTyped<S, Fn::Sum, false>(c.dst, c.srcs, c.nsrcs, c.count, none, 0, 0,
                                              c.stream);
      }
      return launchTyped<S, Fn::Sum, true>(c.dst, c.srcs, c.nsrcs, c.count, none, 0, c.divisor,
                                           c.stream);
    case RedOpKind::PreMulSum:
      if (c.scalar == 1.0 || c.npremul == 0) {
        return launchTyped<S, Fn::Sum, false>(c.dst, c.srcs, c.nsrcs, c.count, none, 0, 0,
                                              c.stream);
      }
      return launchTyped<S, Fn::Sum, true>(c.dst, c.srcs, c.nsrcs, c.count,
                                           Num<S>::fromScalar(c.scalar), c.npremul, 0, c.stream);
  }
  return cudaErrorInvalidValue;
}

int dispatchType(lanesDataType_t type, const Call& c) {
  switch (type) {
    case lanesInt8:
      return dispatchOp<int8_t>(c);
    case lanesUint8:
      return dispatchOp<uint8_t>(c);
    case lanesInt32:
      return dispatchOp<int32_t>(c);
    case lanesUint32:
      return dispatchOp<uint32_t>(c);
    case lanesInt64:
      return dispatchOp<int64_t>(c);
    case lanesUint64:
      return dispatchOp<uint64_t>(c);
    case lanesFloat16:
      return dispatchOp<Half>(c);
    case lanesFloat32:
      return dispatchOp<float>(c);
    case lanesFloat64:
      return dispatchOp<double>(c);
    case lanesBfloat16:
      return dispatchOp<Bf16>(c);
    case lanesFloat8e4m3:
      return dispatchOp<E4m3>(c);
    case lanesFloat8e5m2:
      return dispatchOp<E5m2>(c);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

int launchReduce(void* dst, const void* const* srcs, int nsrcs, size_t count, lanesDataType_t type,
                 RedOpKind op, double premulScalar, int avgDivisor, cudaStream_t stream,
                 int premulSources) {
  if (nsrcs < 1 || nsrcs > kMaxReduceSources) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  if (dst == nullptr || srcs == nullptr) return cudaErrorInvalidValue;
  for (int s = 0; s < nsrcs; ++s) {
    if (srcs[s] == nullptr) return cudaErrorInvalidValue;
  }
  const int npremul = premulSources < 0 || premulSources > nsrcs ? nsrcs : premulSources;
  return dispatchType(type,
                      Call{dst, srcs, nsrcs, count, op, premulScalar, avgDivisor, npremul, stream});
}

int launchCopy(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  const void* srcs[1] = {src};
  return launchReduce(dst, srcs, 1, bytes, lanesUint8, RedOpKind::Sum, 1.0, 0, stream);
}

int launchScale(void* dst, const void* src, size_t count, lanesDataType_t type, double scalar,
                cudaStream_t stream) {
  const void* srcs[1] = {src};
  return launchReduce(dst, srcs, 1, count, type, RedOpKind::PreMulSum, scalar, 0, stream, 1);
}

}  // namespace lanes::cuda
