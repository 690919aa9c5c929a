// What the LL kernels share (the collectives' ll_allreduce.cu and the
// send/recv kernel's ll_pairs.cu): the 16-byte line {data0, flag, data1, flag}
// in mapped host memory, payload packing, and the bounded wait that turns an
// abort, a peer's absence or a sibling block's failure into an error in the
// rank's control block (interface and protocol: ll_allreduce.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/ll_allreduce.h"

namespace lanes::cuda::ll {

inline constexpr unsigned kAbortEvery = 256;  // polls between reads of the host's abort word (2^k)
inline constexpr unsigned long long kDefaultTimeoutNs = 300ull * 1000 * 1000 * 1000;
// A slot whose last whole rewrite is more than 2^21 calls old is rewritten
// whole, so no line keeps a flag older than that: the 32-bit flag cannot wrap
// around to a stale line's value (that would take 2^32 calls). Counted per
// slot, as other protocols' calls advance the same sequence number.
inline constexpr unsigned long long kRefreshMask = (1ull << 21) - 1;

__device__ __forceinline__ unsigned long long nowNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One 16-byte store: {data0, flag, data1, flag}.
__device__ __forceinline__ void storeLine(uint4* p, uint64_t v, uint32_t flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p),
               "r"(static_cast<uint32_t>(v)), "r"(flag), "r"(static_cast<uint32_t>(v >> 32)),
               "r"(flag)
               : "memory");
}

__device__ __forceinline__ uint4 loadLine(const uint4* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

// A line read carries `flag` in both halves: the payload is this use's.
__device__ __forceinline__ bool lineHas(const uint4& v, uint32_t flag) {
  return v.y == flag && v.w == flag;
}
__device__ __forceinline__ uint64_t linePayload(const uint4& v) {
  return static_cast<uint64_t>(v.x) | (static_cast<uint64_t>(v.z) << 32);
}

// Payload line i of a `bytes`-long buffer at `base`: bytes past its end read
// as zero; any alignment.
__device__ __forceinline__ uint64_t loadBytes(const unsigned char* base, size_t bytes, size_t i) {
  const size_t b0 = i * kLlLinePayload;
  const size_t len = bytes - b0 < kLlLinePayload ? bytes - b0 : kLlLinePayload;
  const unsigned char* p = base + b0;
  if (len == kLlLinePayload && (reinterpret_cast<uintptr_t>(p) & 7) == 0)
    return *reinterpret_cast<const uint64_t*>(p);
  uint64_t v = 0;
  for (size_t k = 0; k < len; ++k) v |= static_cast<uint64_t>(p[k]) << (8 * k);
  return v;
}

// Payload line i of a `bytes`-long output at `base`; any alignment.
__device__ __forceinline__ void storeBytes(unsigned char* base, size_t bytes, size_t i,
                                           uint64_t v) {
  const size_t b0 = i * kLlLinePayload;
  const size_t len = bytes - b0 < kLlLinePayload ? bytes - b0 : kLlLinePayload;
  unsigned char* p = base + b0;
  if (len == kLlLinePayload && (reinterpret_cast<uintptr_t>(p) & 7) == 0) {
    *reinterpret_cast<uint64_t*>(p) = v;
  } else {
    for (size_t k = 0; k < len; ++k) p[k] = static_cast<unsigned char>(v >> (8 * k));
  }
}

// First failure of this call: the block stops (the others see state->failed
// at their next miss), and the first block to fail tells the host code, peer and seq.
__device__ inline void recordFailure(LlDeviceState* state, LlControl* c, int* failed, uint32_t code,
                                     int peer, unsigned long long seq) {
  if (atomicCAS(failed, 0, 1) != 0) return;
  if (atomicExch(&state->failed, 1u) != 0) return;
  volatile LlControl* vc = c;
  if (vc->error != kLlOk) return;  // sticky: the first failed call is the one to report
  vc->peer = static_cast<uint32_t>(peer);
  vc->seq = seq;
  __threadfence_system();
  vc->error = code;
  __threadfence_system();
}

// A wait for a peer that has not come: whether to give up (the call failed
// elsewhere, ran past its deadline, or the host set the abort word).
// `timedOut`: the LlError a timeout leaves.
__device__ __forceinline__ bool giveUp(LlDeviceState* state, LlControl* c, int* failed,
                                       unsigned long long deadline, unsigned* polls, int peer,
                                       unsigned long long seq, uint32_t timedOut = kLlTimedOut) {
  if (*static_cast<volatile int*>(failed)) return true;
  if (*static_cast<volatile unsigned*>(&state->failed) != 0) {  // another block gave up
    atomicExch(failed, 1);
    return true;
  }
  if (nowNs() > deadline) {
    recordFailure(state, c, failed, timedOut, peer, seq);
    return true;
  }
  // The abort word lives in host memory: read at the first miss, then rarely.
  if ((++*polls & (kAbortEvery - 1)) == 1 && static_cast<volatile LlControl*>(c)->abort != 0) {
    recordFailure(state, c, failed, kLlAborted, peer, seq);
    return true;
  }
  return false;
}

// What a rank does in a collective of the LL family (this kernel and the
// simple one). Reducing: it combines every rank's data into recv. Gathering:
// it stores peers' data into recv. Otherwise it reads a line or flag of every
// peer and nothing more.
__device__ __forceinline__ bool rankReduces(LlCollective c, int rank, int root) {
  return c == LlCollective::AllReduce || c == LlCollective::ReduceScatter ||
         (c == LlCollective::Reduce && rank == root);
}
__device__ __forceinline__ bool rankGathers(LlCollective c, int rank, int root) {
  return c == LlCollective::AllGather || (c == LlCollective::Broadcast && rank != root);
}

// A call's start, on thread 0 of every block: the sequence number and the
// sticky failure from device memory (no PCIe read), the deadline of its waits,
// and `entered` (every block posts it, so none touches the slots unannounced).
// No block writes the sequence number before every block has read it (endCall).
__device__ inline void beginCall(const LlDeviceState* state, volatile LlControl* vc,
                                 unsigned long long timeoutNs, unsigned long long* seq,
                                 unsigned long long* deadline, int* failed) {
  *seq = state->seq + 1;
  *failed = state->failed != 0 ? 1 : 0;
  *deadline = nowNs() + (timeoutNs != 0 ? timeoutNs : kDefaultTimeoutNs);
  vc->entered = *seq;
}

// A call's end, after a barrier, on every thread: the last block out advances
// the sequence number (the next call or graph replay takes seq + 1), stores
// seq in *alsoSeq where given, and says in `exited` that this rank's kernels
// are done with the arena (destroy waits for it). A lone block needs no
// count: the fences and the atomic cost a few microseconds a call (8
// processes under MPS, 4-32 KiB).
__device__ inline void endCall(LlDeviceState* state, volatile LlControl* vc, unsigned long long seq,
                               unsigned long long* alsoSeq = nullptr) {
  if (threadIdx.x != 0) return;
  if (gridDim.x == 1) {
    state->seq = seq;
    if (alsoSeq != nullptr) *alsoSeq = seq;
    vc->exited = seq;
    return;
  }
  __threadfence_system();  // this block's slot writes before `exited` can say the arena is free
  if (atomicAdd(&state->blocksDone, 1u) == gridDim.x - 1) {
    __threadfence();  // every block's count (and reads of seq) before the stores below
    state->blocksDone = 0;
    state->seq = seq;
    if (alsoSeq != nullptr) *alsoSeq = seq;
    __threadfence_system();
    vc->exited = seq;
  }
}

}  // namespace lanes::cuda::ll
