// Reduction and copy kernels for device buffers, enqueued on a CUDA stream.
//
// Plain C++ (no CUDA headers needed by callers). Every function returns a
// cudaError_t as int: 0 (cudaSuccess) when the kernel was enqueued, otherwise
// the launch error, or cudaErrorInvalidValue (1) for bad arguments. Nothing
// here synchronises; the work runs in stream order after what is already on
// `stream`. count == 0 enqueues nothing and returns 0.
//
// Arithmetic (the exact rules, shared bit-for-bit with kernels/cpu, are in
// docs/kernels.md):
//  - float16, bfloat16 and float8 values are widened to float, each binary op
//    is done in float (round-to-nearest-even) and the result rounded back to
//    the type at once, as NCCL's kernels do. float8 rounding saturates to the
//    largest finite value (±448 e4m3, ±57344 e5m2), infinities included.
//  - Every NaN an op produces is the type's canonical NaN, so CPU and GPU
//    results, and op(a, b) vs op(b, a), agree bit for bit.
//  - float and double use IEEE ops with no FMA contraction and no
//    flush-to-zero; integers wrap modulo 2^bits.
//  - max/min ignore a NaN operand (NaN only when both are NaN), as NCCL's
//    fmaxf/__hmax do, and order -0 below +0.
//  - Sources are combined left to right: ((s0 op s1) op s2) ...
//
// Pointers must be aligned to the element size. Any alignment beyond that is
// handled: the 16-byte vector path runs when dst and every source share the
// same offset modulo 16, otherwise an element-wise path does.
#pragma once

#include <cstddef>

#include "base/datatype.h"
#include "lanes/lanes.h"

namespace lanes::cuda {

inline constexpr int kMaxReduceSources = 8;

// dst[i] = post(pre(srcs[0][i]) op pre(srcs[1][i]) op ... op pre(srcs[nsrcs-1][i]))
// for i < count, in one pass over the inputs. 1 <= nsrcs <= kMaxReduceSources.
// dst may be the same pointer as any source (in place); partial overlap is not allowed.
//
//  - op Sum/Prod/Max/Min: pre and post are identity.
//  - op PreMulSum: op is sum; pre(x) = x * s for the first `premulSources`
//    sources (all of them when premulSources < 0 or > nsrcs), identity for the
//    rest. s is premulScalar converted to the datatype (see docs/kernels.md).
//    The split lets a pipeline scale only its own raw input while adding
//    partial results that were already scaled upstream. premulScalar == 1 skips
//    the multiplication (it is exact).
//  - op Avg: op is sum; post(x) = x / avgDivisor when avgDivisor > 1
//    (integers truncate toward zero, as NCCL), identity otherwise, so the
//    intermediate steps of an algorithm pass 0 and only the last passes nranks.
// Loads every reduction kernel now. With lazy module loading (CUDA's default
// since 12.2) a kernel's first launch loads it, and loading may wait for the
// whole context: for a kernel whose stream is held by a peer that waits for
// this rank, that wait never ends. Called once per communicator at init.
int preloadReduceKernels();

int launchReduce(void* dst, const void* const* srcs, int nsrcs, size_t count, lanesDataType_t type,
                 RedOpKind op, double premulScalar, int avgDivisor, cudaStream_t stream,
                 int premulSources = -1);

// dst[0..bytes) = src[0..bytes) with SM loads/stores, for copies too small or
// too misaligned to be worth a copy-engine memcpy node. Any byte alignment.
int launchCopy(void* dst, const void* src, size_t bytes, cudaStream_t stream);

// dst[i] = src[i] * s, s being scalar converted to the datatype: exactly
// PreMulSum's pre-multiplication (and kernels/cpu premultiply). dst may be src.
int launchScale(void* dst, const void* src, size_t count, lanesDataType_t type, double scalar,
                cudaStream_t stream);

}  // namespace lanes::cuda
