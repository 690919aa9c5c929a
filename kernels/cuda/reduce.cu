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
#include "kernels/cuda/reduce_ops.cuh"

namespace lanes::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kBlocksPerSm = 2;  // 1024 threads/SM, up to 64 registers each
constexpr size_t kVecBytes = 16;

// ---- the kernel ----

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
  return withElementType(type,
                         [&](auto tag) { return dispatchOp<typename decltype(tag)::type>(c); });
}

template <class S>
int preloadTyped() {
  cudaFuncAttributes attr{};
  for (auto kernel : {reduceKernel<S, Fn::Sum, false>, reduceKernel<S, Fn::Prod, false>,
                      reduceKernel<S, Fn::Max, false>, reduceKernel<S, Fn::Min, false>,
                      reduceKernel<S, Fn::Sum, true>}) {
    if (cudaError_t err = cudaFuncGetAttributes(&attr, kernel); err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace

int preloadReduceKernels() {
  return forEachElementType([](auto tag) { return preloadTyped<typename decltype(tag)::type>(); });
}

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
