// The LL send/recv kernel (interface and protocol: ll_pairs.h; host side:
// src/exec/cuda/ll_pairs.cc; picture: docs/gpu_data_path.md, "Small sends and
// receives").
//
// One block per stream of messages (direction, peer), kThreads threads:
//  - a sending block waits, where the slot's previous message may be unread,
//    for the receiver's acknowledgement (one read of host memory, skipped
//    while the last one seen allows it), writes the message's lines flagged
//    with its number and fences them out;
//  - a receiving block waits on one thread for the message's last line, then
//    reads the others kBatch at a time per thread (their PCIe reads
//    overlap), stores each payload where it belongs in the output once both
//    flags say this message, and acknowledges the message;
//  - the last block out counts the launch (the host's destroy waits for it).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cuda/ll_lines.cuh"
#include "kernels/cuda/ll_pairs.h"

namespace lanes::cuda {
namespace {

using namespace ll;

constexpr int kThreads = 512;
constexpr int kBatch = 4;  // lines one thread has in flight
constexpr size_t kAckStride = 64;
// A launch's messages ride in its parameters: a group of a send and a receive
// per peer fits the small table; larger groups take the large one (kernel
// parameters above 4 KiB need CUDA 12.1, which cmake/cuda.cmake requires).
constexpr int kSmallTable = 32;

template <int kMessages>
struct Launch {
  LlPairArgs args;
  int streams;
  int sendStreams;    // streams that send (they come first)
  bool receivesWait;  // receiving blocks write after every sending block read its input
  uint16_t first[kLlPairMaxStreams + 1];  // stream b's messages: [first[b], first[b + 1])
  uint8_t peer[kLlPairMaxStreams];
  uint8_t send[kLlPairMaxStreams];
  const void* buf[kMessages];
  uint32_t bytes[kMessages];
};

static_assert(sizeof(Launch<kLlPairMaxMessages>) <= 32764,
              "kernel parameters: at most 32764 bytes");

__device__ __forceinline__ uint4* pairSlot(const LlPairArgs& a, int sender, int receiver,
                                           unsigned long long m) {
  const size_t pair = static_cast<size_t>(sender) * a.nranks + receiver;
  return reinterpret_cast<uint4*>(static_cast<unsigned char*>(a.slots) +
                                  (pair * kLlPairDepth + m % kLlPairDepth) * a.slotBytes);
}

__device__ __forceinline__ volatile unsigned long long* ackWord(const LlPairArgs& a, int sender,
                                                                int receiver) {
  const size_t pair = static_cast<size_t>(sender) * a.nranks + receiver;
  return reinterpret_cast<volatile unsigned long long*>(static_cast<unsigned char*>(a.acks) +
                                                        pair * kAckStride);
}

template <int kMessages>
__global__ void __launch_bounds__(kThreads, 1) llPairsKernel(const Launch<kMessages> L) {
  const LlPairArgs& a = L.args;
  __shared__ unsigned long long sBase, sDeadline;
  __shared__ int sFailed;
  volatile LlControl* vc = a.control;
  const int tid = static_cast<int>(threadIdx.x);
  const int nthreads = static_cast<int>(blockDim.x);
  const int b = static_cast<int>(blockIdx.x);
  const int peer = L.peer[b];
  const bool sending = L.send[b] != 0;
  const int first = L.first[b], last = L.first[b + 1];

  if (tid == 0) {
    // Each block owns its stream's counter: no other block of the launch reads it.
    sBase = sending ? a.state->sent[peer] : a.state->received[peer];
    sFailed = a.state->failed != 0 ? 1 : 0;
    sDeadline = nowNs() + (a.timeoutNs != 0 ? a.timeoutNs : kDefaultTimeoutNs);
    vc->pairEntered = a.state->pairLaunches + 1;  // before any block touches the slots
  }
  __syncthreads();

  // sFailed is read only right after a barrier, where every thread sees the
  // same value; a failed wait returns at once, so the loop reaches one.
  for (int k = first; k < last; ++k) {
    const unsigned long long m = sBase + 1 + static_cast<unsigned long long>(k - first);
    const uint32_t flag = static_cast<uint32_t>(m);
    const size_t bytes = L.bytes[k];
    const size_t lines = (bytes + kLlLinePayload - 1) / kLlLinePayload;
    if (sending) {
      // The slot's previous message (m - depth) must have been read.
      if (tid == 0 && m > kLlPairDepth && a.state->ackSeen[peer] < m - kLlPairDepth) {
        volatile unsigned long long* ack = ackWord(a, a.rank, peer);
        unsigned polls = 0;
        for (;;) {
          const unsigned long long seen = *ack;
          if (seen >= m - kLlPairDepth) {
            a.state->ackSeen[peer] = seen;
            break;
          }
          if (giveUp(a.state, a.control, &sFailed, sDeadline, &polls, peer, m, kLlSendTimedOut))
            break;
        }
      }
      __syncthreads();
      if (sFailed) break;
      uint4* slot = pairSlot(a, a.rank, peer, m);
      const auto* in = static_cast<const unsigned char*>(L.buf[k]);
      for (size_t i = tid; i < lines; i += nthreads)
        storeLine(slot + i, loadBytes(in, bytes, i), flag);
      if ((m & kRefreshMask) < kLlPairDepth) {
        const size_t slotLines = a.slotBytes / kLlLineBytes;
        for (size_t i = lines + tid; i < slotLines; i += nthreads) storeLine(slot + i, 0, flag);
      }
      // Out now: a few lines otherwise linger in the GPU's write path until
      // later traffic pushes them (the collectives' small-post fence).
      __threadfence_system();
      if (k == last - 1 && L.receivesWait) {
        __syncthreads();  // every thread's reads of the input are done
        if (tid == 0) atomicAdd(&a.state->pairSendsDone, 1u);
      }
    } else {
      // In place: nothing of the output is written before the sends read it.
      if (k == first && L.receivesWait && tid == 0) {
        volatile unsigned* done = &a.state->pairSendsDone;
        unsigned polls = 0;
        while (
            *done < static_cast<unsigned>(L.sendStreams) &&
            !giveUp(a.state, a.control, &sFailed, sDeadline, &polls, peer, m, kLlReceiveTimedOut)) {
        }
      }
      const uint4* slot = pairSlot(a, peer, a.rank, m);
      auto* out = static_cast<unsigned char*>(const_cast<void*>(L.buf[k]));
      // One thread waits for the message's last line before the others
      // read: hundreds of threads polling an empty slot slow the link for
      // everyone (2 processes under MPS on the H200: 4 KiB took 30 us with
      // every thread polling from the start, 8 B 14).
      if (tid == 0) {
        unsigned polls = 0;
        for (;;) {
          const uint4 v = loadLine(slot + lines - 1);
          if (lineHas(v, flag)) {
            storeBytes(out, bytes, lines - 1, linePayload(v));
            break;
          }
          if (giveUp(a.state, a.control, &sFailed, sDeadline, &polls, peer, m, kLlReceiveTimedOut))
            break;
        }
      }
      __syncthreads();
      if (sFailed) break;
      const size_t rest = lines - 1;  // the lines before the last
      const size_t step = static_cast<size_t>(nthreads) * kBatch;
      for (size_t base = tid; base < rest; base += step) {
        bool need[kBatch];
#pragma unroll
        for (int j = 0; j < kBatch; ++j) need[j] = base + j * nthreads < rest;
        unsigned polls = 0;
        bool gaveUp = false;
        for (;;) {
          uint4 v[kBatch];
#pragma unroll
          for (int j = 0; j < kBatch; ++j)
            if (need[j]) v[j] = loadLine(slot + base + j * nthreads);  // the reads overlap
          bool waiting = false;
#pragma unroll
          for (int j = 0; j < kBatch; ++j) {
            if (!need[j]) continue;
            if (lineHas(v[j], flag)) {
              storeBytes(out, bytes, base + j * nthreads, linePayload(v[j]));
              need[j] = false;
            } else {
              waiting = true;
            }
          }
          if (!waiting) break;
          if (giveUp(a.state, a.control, &sFailed, sDeadline, &polls, peer, m,
                     kLlReceiveTimedOut)) {
            gaveUp = true;
            break;
          }
        }
        if (gaveUp) break;
      }
      __syncthreads();  // every line read before the acknowledgement
      if (sFailed) break;
      if (tid == 0) {
        *ackWord(a, peer, a.rank) = m;
        __threadfence_system();  // out now: the sender may be waiting for it
      }
    }
  }

  __syncthreads();
  if (tid == 0) {
    if (!sFailed) (sending ? a.state->sent : a.state->received)[peer] = sBase + (last - first);
    __threadfence_system();  // this block's slot writes before `pairExited` says they are done
    if (atomicAdd(&a.state->pairBlocksDone, 1u) == gridDim.x - 1) {
      __threadfence();
      a.state->pairBlocksDone = 0;
      a.state->pairSendsDone = 0;
      const unsigned long long n = a.state->pairLaunches + 1;
      a.state->pairLaunches = n;
      __threadfence_system();
      vc->pairExited = n;
    }
  }
}

// One stream of messages: direction, peer and the messages in order.
struct Stream {
  bool send;
  int peer;
  std::vector<const LlPairMessage*> messages;
};

template <int kMessages>
int launchTable(const LlPairArgs& args, const std::vector<Stream>& streams, bool receivesWait,
                cudaStream_t stream) {
  Launch<kMessages> L{};
  L.args = args;
  L.streams = static_cast<int>(streams.size());
  L.receivesWait = receivesWait;
  int k = 0;
  for (size_t b = 0; b < streams.size(); ++b) {
    if (streams[b].send) ++L.sendStreams;
    L.first[b] = static_cast<uint16_t>(k);
    L.peer[b] = static_cast<uint8_t>(streams[b].peer);
    L.send[b] = streams[b].send ? 1 : 0;
    for (const LlPairMessage* m : streams[b].messages) {
      L.buf[k] = m->buf;
      L.bytes[k] = static_cast<uint32_t>(m->bytes);
      ++k;
    }
  }
  L.first[streams.size()] = static_cast<uint16_t>(k);
  llPairsKernel<kMessages><<<static_cast<unsigned>(streams.size()), kThreads, 0, stream>>>(L);
  return cudaGetLastError();
}

int launchStreams(const LlPairArgs& args, const std::vector<Stream>& streams, size_t messages,
                  bool receivesWait, cudaStream_t stream) {
  if (streams.empty()) return cudaSuccess;
  return messages <= kSmallTable
             ? launchTable<kSmallTable>(args, streams, receivesWait, stream)
             : launchTable<kLlPairMaxMessages>(args, streams, receivesWait, stream);
}

template <int kMessages>
int residentTyped(int* perSm) {
  int n = 0;
  const int rc =
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, llPairsKernel<kMessages>, kThreads, 0);
  if (rc == cudaSuccess) *perSm = std::min(*perSm, n);
  return rc;
}

}  // namespace

size_t llPairSlotBytes(size_t maxBytes) { return llSlotBytes(maxBytes); }

size_t llPairAckOffset(int nranks, size_t maxBytes) {
  const auto pairs = static_cast<size_t>(nranks) * static_cast<size_t>(nranks);
  return pairs * kLlPairDepth * llPairSlotBytes(maxBytes);
}

size_t llPairRegionBytes(int nranks, size_t maxBytes) {
  const auto pairs = static_cast<size_t>(nranks) * static_cast<size_t>(nranks);
  return llPairAckOffset(nranks, maxBytes) + pairs * kAckStride;
}

int llPairResidentBlocksPerSm(int* out) {
  int perSm = 1 << 20;
  int rc = residentTyped<kSmallTable>(&perSm);
  if (rc == cudaSuccess) rc = residentTyped<kLlPairMaxMessages>(&perSm);
  *out = rc == cudaSuccess ? perSm : 1;
  return rc;
}

int preloadLlPairKernels() {
  cudaFuncAttributes attr{};
  int rc = cudaFuncGetAttributes(&attr, llPairsKernel<kSmallTable>);
  if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&attr, llPairsKernel<kLlPairMaxMessages>);
  return rc;
}

int launchLlPairs(const LlPairArgs& args, const LlPairMessage* messages, size_t count,
                  bool sendsBeforeReceives, cudaStream_t stream) {
  if (args.nranks < 2 || args.nranks > kLlMaxRanks || args.rank < 0 || args.rank >= args.nranks ||
      args.slots == nullptr || args.acks == nullptr || args.state == nullptr ||
      args.control == nullptr || args.maxStreams < 1 || args.slotBytes % kLlLineBytes != 0)
    return cudaErrorInvalidValue;
  const size_t capacity = args.slotBytes / kLlLineBytes * kLlLinePayload;
  // Streams in the order their first message was made (sends first if asked).
  std::vector<Stream> ordered;
  for (int pass = 0; pass < (sendsBeforeReceives ? 2 : 1); ++pass) {
    for (size_t i = 0; i < count; ++i) {
      const LlPairMessage& m = messages[i];
      if (m.peer < 0 || m.peer >= args.nranks || m.peer == args.rank || m.bytes > capacity ||
          (m.bytes > 0 && m.buf == nullptr))
        return cudaErrorInvalidValue;
      if (m.bytes == 0 || (sendsBeforeReceives && m.send != (pass == 0))) continue;
      auto it = std::find_if(ordered.begin(), ordered.end(),
                             [&](const Stream& s) { return s.send == m.send && s.peer == m.peer; });
      if (it == ordered.end()) it = ordered.insert(ordered.end(), Stream{m.send, m.peer, {}});
      it->messages.push_back(&m);
    }
  }
  // One launch: a stream split over launches could wait for acknowledgements
  // its peer gives only in a later launch of its own.
  size_t messagesInLaunch = 0;
  for (const Stream& s : ordered) messagesInLaunch += s.messages.size();
  if (static_cast<int>(ordered.size()) > std::min(args.maxStreams, kLlPairMaxStreams) ||
      messagesInLaunch > static_cast<size_t>(kLlPairMaxMessages))
    return cudaErrorInvalidValue;
  return launchStreams(args, ordered, messagesInLaunch, sendsBeforeReceives, stream);
}

}  // namespace lanes::cuda
