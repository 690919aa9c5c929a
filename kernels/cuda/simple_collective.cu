// The simple collective kernel (interface and protocol: simple_collective.h;
// host side: src/exec/cuda/simple_collective.cc; picture:
// docs/gpu_data_path.md, "Mid-size messages").
//
// A grid of `writers` blocks then `readers` blocks of kThreads threads:
//  - writer w posts chunks w, w + writers, ... of this rank's payload (a
//    reduce-scatter: of its input's blocks but its own, block after block): 16-byte
//    loads from the input (PreMulSum: scaled), plain 16-byte stores into the
//    slot, a barrier, then thread 0 fences, sets the chunk's flag word to seq
//    and fences again (pushing the flag out). An all-gather's or broadcast root's writer also
//    copies its chunk to this rank's place in recv (out of place). A
//    broadcast's non-root and a reduce's root post no data (nobody reads
//    it): writer 0 sets flag 0 ("I am here");
//  - reader r takes chunks r, r + readers, ... of the payload: threads
//    0..n-1 each wait for one rank's flag of the chunk (in place, this rank's
//    own too in an all-reduce: the result overwrites input the writers must
//    have posted first), a barrier, then every thread reads kUnroll vectors at a time from
//    each rank in rank order (the next rank's loads in flight while this
//    one's are combined), combines them with reduce_ops.cuh's arithmetic
//    (Avg divided once) and stores the result; a gathering rank stores each
//    peer's vectors where they belong in recv. A rank that reads no data (a
//    broadcast's root, a reduce's non-roots) runs one reader that waits for
//    flag 0 of every peer: that is what keeps slot reuse safe;
//  - the last block out advances the sequence number (ll_lines.cuh, endCall).
// Reads of the slots are volatile: host memory changes under the GPU's caches.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "base/datatype.h"
#include "kernels/cuda/ll_lines.cuh"
#include "kernels/cuda/reduce_ops.cuh"
#include "kernels/cuda/simple_collective.h"

namespace lanes::cuda {
namespace {

using namespace ll;

constexpr int kThreads = 512;
constexpr int kUnroll = 4;  // vectors per thread in flight, per rank
// Blocks per rank, shared among the ranks of the host (the link is theirs):
// with 2 ranks, 16 writers and 32 readers each, within maxBlocks (a call
// uses at most one per chunk). With 4-64 KiB chunks a quarter of that took
// 1.5-2.5 times as long from 64 KiB to 4 MiB (H200, bench/results/simple_h200);
// with 64 KiB chunks 8/16 to 64/128 per host made no difference (H100,
// bench/results/simple_chunks_h100). Both: 2 processes under MPS.
constexpr int kWritersPerHost = 32;
constexpr int kReadersPerHost = 64;

template <class S>
struct Args {
  const unsigned char* send;
  unsigned char* recv;
  size_t bytes;   // a rank's payload (a reduce-scatter's: one block)
  size_t stride;  // a reduce-scatter's posted blocks: simpleBlockStride(bytes)
  size_t chunk;   // kSimpleChunkBytes
  size_t chunks;  // of the payload
  unsigned char* slots;
  size_t slotBytes;
  size_t flagBytes;
  LlDeviceState* state;
  LlControl* control;
  unsigned long long timeoutNs;
  int rank;
  int nranks;
  int root;
  int writers;  // blocks 0..writers-1 post; the rest read
  LlCollective coll;
  Fn fn;
  bool premul;
  bool avg;
  S scalar;
};

// Whether a rank posts data: a broadcast's non-roots and a reduce's root have
// none anyone reads, and post only flag 0 ("present").
__host__ __device__ __forceinline__ bool postsData(LlCollective coll, int rank, int root) {
  return !((coll == LlCollective::Broadcast && rank != root) ||
           (coll == LlCollective::Reduce && rank == root));
}

// Chunks a posting rank writes: a reduce-scatter's peers' blocks, else its payload.
__host__ __device__ __forceinline__ size_t postedChunks(LlCollective coll, int nranks,
                                                        size_t chunks) {
  return (coll == LlCollective::ReduceScatter ? static_cast<size_t>(nranks - 1) : 1) * chunks;
}

__device__ __forceinline__ size_t lenOf(size_t chunk, size_t bytes, size_t off) {
  return bytes - off < chunk ? bytes - off : chunk;
}

template <class S>
union Vec {
  uint4 u;
  S e[kSimpleVectorBytes / sizeof(S)];
};

// 16 bytes of a slot, read past the GPU's caches (ll_lines.cuh).
__device__ __forceinline__ uint4 loadVolatile(const unsigned char* p) {
  return loadLine(reinterpret_cast<const uint4*>(p));
}

// 16 bytes at `off` of a `len`-byte range at `base` of device memory: bytes
// past its end read as zero; any alignment.
__device__ __forceinline__ uint4 loadVector(const unsigned char* base, size_t len, size_t off) {
  const unsigned char* p = base + off;
  if (off + kSimpleVectorBytes <= len && (reinterpret_cast<uintptr_t>(p) & 15) == 0)
    return *reinterpret_cast<const uint4*>(p);
  Vec<uint8_t> v;
  v.u = make_uint4(0, 0, 0, 0);
  for (size_t k = 0; k < kSimpleVectorBytes && off + k < len; ++k) v.e[k] = p[k];
  return v.u;
}

// Stores the bytes of `v` that fall inside the `len`-byte range at `base`.
__device__ __forceinline__ void storeVector(unsigned char* base, size_t len, size_t off, uint4 v) {
  unsigned char* p = base + off;
  if (off + kSimpleVectorBytes <= len && (reinterpret_cast<uintptr_t>(p) & 15) == 0) {
    *reinterpret_cast<uint4*>(p) = v;
    return;
  }
  Vec<uint8_t> b;
  b.u = v;
  for (size_t k = 0; k < kSimpleVectorBytes && off + k < len; ++k) p[k] = b.e[k];
}

template <class S>
__device__ __forceinline__ uint4 scaled(const Args<S>& a, uint4 v) {
  if (!a.premul) return v;
  Vec<S> x;
  x.u = v;
#pragma unroll
  for (int e = 0; e < static_cast<int>(kSimpleVectorBytes / sizeof(S)); ++e)
    x.e[e] = Num<S>::mul(x.e[e], a.scalar);
  return x.u;
}

template <class S, Fn F>
__device__ __forceinline__ uint4 combineVectors(uint4 acc, uint4 in) {
  Vec<S> x, y;
  x.u = acc;
  y.u = in;
#pragma unroll
  for (int e = 0; e < static_cast<int>(kSimpleVectorBytes / sizeof(S)); ++e)
    x.e[e] = combine<S, F>(x.e[e], y.e[e]);
  return x.u;
}

template <class S>
__device__ __forceinline__ uint4 combineOp(const Args<S>& a, uint4 acc, uint4 in) {
  switch (a.fn) {
    case Fn::Prod:
      return combineVectors<S, Fn::Prod>(acc, in);
    case Fn::Max:
      return combineVectors<S, Fn::Max>(acc, in);
    case Fn::Min:
      return combineVectors<S, Fn::Min>(acc, in);
    default:
      return combineVectors<S, Fn::Sum>(acc, in);
  }
}

template <class S>
__device__ __forceinline__ uint4 averaged(const Args<S>& a, uint4 v) {
  if (!a.avg || a.nranks < 2) return v;
  Vec<S> x;
  x.u = v;
#pragma unroll
  for (int e = 0; e < static_cast<int>(kSimpleVectorBytes / sizeof(S)); ++e)
    x.e[e] = Num<S>::div(x.e[e], a.nranks);
  return x.u;
}

// Rank r's slot of this call: its flag words, then its data.
struct Slot {
  volatile unsigned long long* flags;
  const unsigned char* data;
};
template <class S>
__device__ __forceinline__ Slot slotOf(const Args<S>& a, int r, unsigned long long seq) {
  unsigned char* base = a.slots + (2 * static_cast<size_t>(r) + (seq & 1)) * a.slotBytes;
  return {reinterpret_cast<volatile unsigned long long*>(base), base + a.flagBytes};
}

template <class S>
__device__ void postChunks(const Args<S>& a, unsigned long long seq, int writer) {
  const int tid = static_cast<int>(threadIdx.x);
  unsigned char* base = a.slots + (2 * static_cast<size_t>(a.rank) + (seq & 1)) * a.slotBytes;
  volatile unsigned long long* flags = reinterpret_cast<volatile unsigned long long*>(base);
  unsigned char* data = base + a.flagBytes;
  if (!postsData(a.coll, a.rank, a.root)) {  // present, nothing to post
    if (writer == 0 && tid == 0) flags[0] = seq;
    return;
  }
  const bool scatter = a.coll == LlCollective::ReduceScatter;
  // Out of place, the moving collectives' own payload goes to recv too.
  unsigned char* copyTo = nullptr;
  if (a.coll == LlCollective::AllGather) copyTo = a.recv + static_cast<size_t>(a.rank) * a.bytes;
  if (a.coll == LlCollective::Broadcast) copyTo = a.recv;
  if (copyTo == a.send) copyTo = nullptr;
  const size_t total = postedChunks(a.coll, a.nranks, a.chunks);
  for (size_t i = static_cast<size_t>(writer); i < total; i += static_cast<size_t>(a.writers)) {
    // A reduce-scatter posts every block but its own, which it reads from its input.
    size_t b = i / a.chunks;
    if (scatter && b >= static_cast<size_t>(a.rank)) ++b;
    const size_t j = b * a.chunks + i % a.chunks;  // the chunk's flag
    const size_t off = (j % a.chunks) * a.chunk;
    const size_t len = lenOf(a.chunk, a.bytes, off);
    const unsigned char* src = a.send + b * a.bytes + off;
    unsigned char* dst = data + b * a.stride + off;
    for (size_t v = static_cast<size_t>(tid) * kSimpleVectorBytes; v < len;
         v += kThreads * kSimpleVectorBytes) {
      const uint4 x = loadVector(src, len, v);
      *reinterpret_cast<uint4*>(dst + v) = scaled(a, x);  // moves: never scaled
      if (copyTo != nullptr) storeVector(copyTo + off, len, v, x);
    }
    // The block's data, out before the flag says it is there; then the flag,
    // pushed out at once: a lone store lingers in the GPU's write path until
    // later traffic pushes it (ll_allreduce.cu, kFenceBelowLines). One
    // thread's fences after the barrier: a fence on every thread took 20-30%
    // longer from 64 KiB to 1 MiB.
    __syncthreads();
    if (tid == 0) {
      __threadfence_system();
      flags[j] = seq;
      __threadfence_system();
    }
  }
}

// Waits on threads 0..n-1 for flag `index` of the ranks `wanted` says; false
// when the call failed (every thread returns the same).
template <class S, class Wanted>
__device__ bool waitFlags(const Args<S>& a, unsigned long long seq, size_t index, Wanted wanted,
                          int* failed, unsigned long long deadline) {
  const int q = static_cast<int>(threadIdx.x);
  if (q < a.nranks && wanted(q)) {
    volatile unsigned long long* flag = slotOf(a, q, seq).flags + index;
    unsigned polls = 0;
    while (*flag != seq) {
      if (giveUp(a.state, a.control, failed, deadline, &polls, q, seq, kSimpleTimedOut)) break;
    }
    // The chunk's data, written before its flag, is read after this (by
    // every thread, past the barrier).
    asm volatile("fence.acq_rel.sys;" ::: "memory");
  }
  __syncthreads();
  return *static_cast<volatile int*>(failed) == 0;
}

// Chunk k reduced over ranks 0..n-1 in order and stored to recv.
template <class S>
__device__ void reduceChunk(const Args<S>& a, unsigned long long seq, size_t k) {
  const bool scatter = a.coll == LlCollective::ReduceScatter;
  const size_t off = k * a.chunk;
  const size_t len = lenOf(a.chunk, a.bytes, off);
  const size_t at = (scatter ? static_cast<size_t>(a.rank) * a.stride : 0) + off;
  const unsigned char* own = a.send + (scatter ? static_cast<size_t>(a.rank) * a.bytes : 0) + off;
  constexpr size_t kStep = static_cast<size_t>(kThreads) * kSimpleVectorBytes;
  for (size_t v0 = threadIdx.x * kSimpleVectorBytes; v0 < len; v0 += kStep * kUnroll) {
    auto load = [&](int q, uint4* out) {
      const unsigned char* peer = q == a.rank ? nullptr : slotOf(a, q, seq).data + at;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const size_t v = v0 + u * kStep;
        if (v >= len) break;
        out[u] = peer != nullptr ? loadVolatile(peer + v) : scaled(a, loadVector(own, len, v));
      }
    };
    uint4 acc[kUnroll] = {}, cur[kUnroll] = {}, next[kUnroll] = {};
    load(0, cur);
    for (int q = 0; q < a.nranks; ++q) {
      if (q + 1 < a.nranks) load(q + 1, next);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        acc[u] = q == 0 ? cur[u] : combineOp(a, acc[u], cur[u]);
        cur[u] = next[u];
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t v = v0 + u * kStep;
      if (v < len) storeVector(a.recv + off, len, v, averaged(a, acc[u]));
    }
  }
}

// Chunk k of every peer whose payload this rank gathers, stored where it belongs.
template <class S>
__device__ void gatherChunk(const Args<S>& a, unsigned long long seq, size_t k) {
  const size_t off = k * a.chunk;
  const size_t len = lenOf(a.chunk, a.bytes, off);
  constexpr size_t kStep = static_cast<size_t>(kThreads) * kSimpleVectorBytes;
  for (int q = 0; q < a.nranks; ++q) {
    const bool fromRoot = a.coll == LlCollective::Broadcast;
    if (fromRoot ? q != a.root : q == a.rank) continue;
    const unsigned char* src = slotOf(a, q, seq).data + off;
    unsigned char* dst = a.recv + (fromRoot ? 0 : static_cast<size_t>(q) * a.bytes) + off;
    for (size_t v0 = threadIdx.x * kSimpleVectorBytes; v0 < len; v0 += kStep * kUnroll) {
      uint4 x[kUnroll] = {};
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (v0 + u * kStep < len) x[u] = loadVolatile(src + v0 + u * kStep);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (v0 + u * kStep < len) storeVector(dst, len, v0 + u * kStep, x[u]);
    }
  }
}

template <class S>
__device__ void readChunks(const Args<S>& a, unsigned long long seq, int reader, int readers,
                           int* failed, unsigned long long deadline) {
  const bool reducing = rankReduces(a.coll, a.rank, a.root);
  const bool gathering = rankGathers(a.coll, a.rank, a.root);
  if (!reducing && !gathering) {  // nothing to read: flag 0 of every peer
    if (reader == 0)
      waitFlags(
          a, seq, 0, [&](int q) { return q != a.rank; }, failed, deadline);
    return;
  }
  const bool scatter = a.coll == LlCollective::ReduceScatter;
  const bool fromRoot = a.coll == LlCollective::Broadcast;
  const unsigned char* ownInput = a.send + (scatter ? static_cast<size_t>(a.rank) * a.bytes : 0);
  // Only an all-reduce posts the part of its input its result overwrites.
  const bool overwritesInput = a.coll == LlCollective::AllReduce && ownInput == a.recv;
  for (size_t k = static_cast<size_t>(reader); k < a.chunks; k += static_cast<size_t>(readers)) {
    const size_t index = (scatter ? static_cast<size_t>(a.rank) * a.chunks : 0) + k;
    // A broadcast's data is the root's; its chunk 0 also waits for the other
    // ranks' flag 0 (every call reads a flag of every peer). This rank's own
    // flag only where the result overwrites input its writers must post
    // first (in place; an all-gather never writes its own block).
    auto wanted = [&](int q) {
      if (q == a.rank) return overwritesInput;
      return !fromRoot || q == a.root || k == 0;
    };
    if (!waitFlags(a, seq, index, wanted, failed, deadline)) return;
    if (reducing)
      reduceChunk(a, seq, k);
    else
      gatherChunk(a, seq, k);
  }
}

template <class S>
__global__ void __launch_bounds__(kThreads, 1) simpleKernel(const Args<S> a) {
  __shared__ unsigned long long sSeq, sDeadline;
  __shared__ int sFailed;
  volatile LlControl* vc = a.control;
  const int block = static_cast<int>(blockIdx.x);
  if (threadIdx.x == 0) beginCall(a.state, vc, a.timeoutNs, &sSeq, &sDeadline, &sFailed);
  __syncthreads();
  const unsigned long long seq = sSeq;
  if (!sFailed && a.nranks == 1) {
    const size_t step = static_cast<size_t>(gridDim.x) * kThreads * kSimpleVectorBytes;
    for (size_t v = (static_cast<size_t>(block) * kThreads + threadIdx.x) * kSimpleVectorBytes;
         v < a.bytes; v += step) {
      const uint4 x = loadVector(a.send, a.bytes, v);
      storeVector(a.recv, a.bytes, v, scaled(a, x));
    }
  } else if (!sFailed && block < a.writers) {
    postChunks(a, seq, block);
  } else if (!sFailed) {
    readChunks(a, seq, block - a.writers, static_cast<int>(gridDim.x) - a.writers, &sFailed,
               sDeadline);
  }
  __syncthreads();
  endCall(a.state, vc, seq);
}

// Writer and reader blocks for a call: enough for its chunks, within the
// host's share and maxBlocks (at least one of each).
void gridOf(LlCollective coll, int rank, int root, int nranks, size_t chunks, int maxBlocks,
            int* writers, int* readers) {
  // A single rank copies its input with the whole grid: sized as a poster's.
  const bool alone = nranks <= 1;
  const bool silent = !alone && !postsData(coll, rank, root);
  const size_t posted = alone ? chunks : postedChunks(coll, nranks, chunks);
  const bool reads = !(coll == LlCollective::Broadcast && rank == root) &&
                     !(coll == LlCollective::Reduce && rank != root);
  const int n = std::max(1, nranks);
  *writers =
      silent ? 1 : static_cast<int>(std::min<size_t>(posted, std::max(1, kWritersPerHost / n)));
  *readers =
      reads ? static_cast<int>(std::min<size_t>(chunks, std::max(1, kReadersPerHost / n))) : 1;
  while (*writers + *readers > maxBlocks && (*writers > 1 || *readers > 1)) {
    if (*readers >= *writers)
      --*readers;
    else
      --*writers;
  }
}

template <class S>
int launchTyped(const LlAllReduceArgs& in, size_t flagBytes, const OpPlan& op,
                cudaStream_t stream) {
  Args<S> a{};
  a.send = static_cast<const unsigned char*>(in.send);
  a.recv = static_cast<unsigned char*>(in.recv);
  a.bytes = in.count * sizeof(S);
  a.stride = simpleBlockStride(a.bytes);
  a.chunk = kSimpleChunkBytes;
  a.chunks = (a.bytes + a.chunk - 1) / a.chunk;
  a.slots = static_cast<unsigned char*>(in.slots);
  a.slotBytes = in.slotBytes;
  a.flagBytes = flagBytes;
  a.state = in.state;
  a.control = in.control;
  a.timeoutNs = in.timeoutNs;
  a.rank = in.rank;
  a.nranks = in.nranks;
  a.root = in.root;
  a.coll = in.coll;
  a.fn = op.fn;
  a.premul = op.premul;
  a.avg = op.avg;
  if (op.premul) a.scalar = Num<S>::fromScalar(in.premulScalar);
  if (in.nranks > 1) {
    const size_t posted = simplePostedBytes(in.coll, a.bytes, in.nranks);
    const size_t flags = (in.coll == LlCollective::ReduceScatter ? in.nranks : 1) * a.chunks;
    if (posted > in.slotBytes - flagBytes || flags * sizeof(uint64_t) > flagBytes)
      return cudaErrorInvalidValue;
  }
  int writers = 1, readers = 1;
  gridOf(in.coll, in.rank, in.root, in.nranks, a.chunks, in.maxBlocks, &writers, &readers);
  a.writers = writers;
  simpleKernel<S><<<writers + readers, kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

template <class S>
int residentTyped(int* perSm) {
  int n = 0;
  const int rc = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, simpleKernel<S>, kThreads, 0);
  if (rc == cudaSuccess) *perSm = std::min(*perSm, n);
  return rc;
}

}  // namespace

int preloadSimpleKernels() {
  return forEachElementType([](auto tag) {
    cudaFuncAttributes attr{};
    return static_cast<int>(
        cudaFuncGetAttributes(&attr, simpleKernel<typename decltype(tag)::type>));
  });
}

int simpleResidentBlocksPerSm(int* out) {
  int perSm = 1 << 20;
  const int rc = forEachElementType(
      [&](auto tag) { return residentTyped<typename decltype(tag)::type>(&perSm); });
  *out = rc == cudaSuccess ? perSm : 1;
  return rc;
}

int launchSimpleCollective(const LlAllReduceArgs& in, size_t flagBytes, cudaStream_t stream) {
  if (in.count == 0) return cudaSuccess;
  LlAllReduceArgs a = in;
  if (const int rc = prepareLlArgs(&a); rc != cudaSuccess) return rc;
  if (a.maxBlocks < 2) return cudaErrorInvalidValue;
  if (a.nranks > 1 &&
      (flagBytes == 0 || a.slotBytes <= flagBytes || flagBytes % 16 != 0 || a.slotBytes % 16 != 0))
    return cudaErrorInvalidValue;
  OpPlan op;
  if (!planOp(a.op, a.premulScalar, &op)) return cudaErrorInvalidValue;
  return withElementType(a.type, [&](auto tag) {
    return launchTyped<typename decltype(tag)::type>(a, flagBytes, op, stream);
  });
}

}  // namespace lanes::cuda
