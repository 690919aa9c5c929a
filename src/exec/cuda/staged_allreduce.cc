// The host-staged all-reduce: per chunk, stages A (down), B1 (upload), B2
// (reduce) and C (up) on the four internal streams, ordered across ranks by
// the channel's ready, reduced and consumed counters. The choreography is
// drawn in staged_collectives.h and docs/gpu_data_path.md.
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "base/cuda_check.h"
#include "base/datatype.h"
#include "exec/cuda/staged_collectives.h"
#include "exec/staged_chunking.h"
#include "kernels/cuda/reduce.h"
#include "observe/nvtx_ranges.h"

namespace lanes {

using staged::ceilDiv;
using staged::roundUp;

Status StagedCollectives::enqueueAllReduce(const Request& r) {
  const StageChannel& ch = *channel_;
  const StageArenaLayout& layout = ch.layout();
  const int n = comm_.nranks();
  const int me = comm_.rank();
  const size_t elem = datatypeSize(r.args.type);
  const size_t count = r.args.count;
  const size_t align = std::max<size_t>(1, 16 / elem);  // segments start 16-byte aligned
  const size_t chunkElems =
      staged::allReduceChunkElems(layout.chunkBytes, count, elem, static_cast<size_t>(n), align);
  const auto* send = static_cast<const std::byte*>(r.args.send);
  auto* recv = static_cast<std::byte*>(r.args.recv);
  auto* scratch = static_cast<std::byte*>(scratch_);
  // With an inbox the peers' pieces of my segment arrive in it
  // (uploadPieces), so my uploads are two copies whatever the rank count. Up
  // carries twice the bytes of down here, so its copies are the ones kept
  // large; the n - 1 small copies into the peers' inboxes go down, which has room.

  for (size_t off = 0; off < count; off += chunkElems) {
    const size_t len = std::min(chunkElems, count - off);
    const Chunk c = nextChunk();
    const uint32_t g = c.g;
    const int slot = c.slot;
    const size_t seg = roundUp(ceilDiv(len, static_cast<size_t>(n)), align);
    auto segBegin = [&](int p) { return std::min(len, seg * static_cast<size_t>(p)); };
    auto segEnd = [&](int p) { return std::min(len, seg * static_cast<size_t>(p + 1)); };
    const size_t myBegin = segBegin(me);
    const size_t myLen = segEnd(me) - myBegin;
    const std::byte* in = send + off * elem;
    std::byte* out = recv + off * elem;

    // Each stage's enqueue in an NVTX range: Nsight projects it onto the
    // copies and kernels it enqueued.
    NvtxRange stage("download", (len - myLen) * elem);

    // A (down): the slot is free once every rank consumed its previous use
    // (that also means every rank finished reading the input slots and the
    // result slot of chunk g-K). In place is safe: this chunk's input is
    // copied down before B or C write any of it.
    LANES_RETURN_IF_ERROR(waitSlotFree(down_, c));
    // Only the peers' segments go down: mine is reduced straight from `in`.
    const size_t myEnd = myBegin + myLen;
    if (ch.inbox()) {
      for (int p = 0; p < n; ++p) {
        if (p == me || segEnd(p) == segBegin(p)) continue;
        LANES_CUDA_RETURN(cudaMemcpyAsync(
            ch.inputSlot(p, slot) + static_cast<size_t>(me) * seg * elem, in + segBegin(p) * elem,
            (segEnd(p) - segBegin(p)) * elem, cudaMemcpyDefault, down_));
      }
    } else {
      if (myBegin > 0)
        LANES_CUDA_RETURN(
            cudaMemcpyAsync(ch.inputSlot(me, slot), in, myBegin * elem, cudaMemcpyDefault, down_));
      if (myEnd < len)
        LANES_CUDA_RETURN(cudaMemcpyAsync(ch.inputSlot(me, slot) + myEnd * elem, in + myEnd * elem,
                                          (len - myEnd) * elem, cudaMemcpyDefault, down_));
    }
    LANES_RETURN_IF_ERROR(ch.post(down_, ch.counter(StageFlag::Ready, me), g));
    LANES_CUDA_RETURN(cudaEventRecord(downDone_, down_));

    // B1 (upload): the peers' pieces of my segment into this chunk's half of
    // the scratch, once the reduce of chunk g-2 (same half) has read it.
    stage.pop();
    stage.push("upload pieces", static_cast<uint64_t>(n - 1) * myLen * elem);
    const int half = static_cast<int>(c.issued % 2);
    std::byte* scratchHalf =
        scratch + static_cast<size_t>(half) * scratchSegments_ * scratchStride_;
    auto scratchSegment = [&](size_t i) { return scratchHalf + i * seg * elem; };
    LANES_CUDA_RETURN(cudaStreamWaitEvent(upload_, reduceDone_[half], 0));
    std::vector<const void*> srcs(static_cast<size_t>(n));
    if (myLen > 0)
      LANES_RETURN_IF_ERROR(
          uploadPieces(slot, g, seg * elem, myLen * elem, myBegin * elem, scratchHalf, &srcs));
    LANES_CUDA_RETURN(cudaEventRecord(uploadDone_, upload_));

    // B2 (reduce): my segment, from my device input and the uploaded ones; its
    // result goes down to the result slot. After A: the slot waits (A's
    // consumed waits free the result slot too), and in place, A has read the
    // input before C overwrites it (C runs after this stage).
    stage.pop();
    stage.push("reduce", myLen * elem);
    LANES_CUDA_RETURN(cudaStreamWaitEvent(reduce_, downDone_, 0));
    LANES_CUDA_RETURN(cudaStreamWaitEvent(reduce_, uploadDone_, 0));
    if (myLen > 0) {
      srcs[static_cast<size_t>(me)] = in + myBegin * elem;
      // In place, a first pass of 8 sources overwrites my input before a
      // later pass would read it there: reduce from a copy.
      if (in == out && me >= cuda::kMaxReduceSources) {
        std::byte* copy = scratchSegment(static_cast<size_t>(n - 1));
        LANES_CUDA_RETURN(cudaMemcpyAsync(copy, in + myBegin * elem, myLen * elem,
                                          cudaMemcpyDeviceToDevice, reduce_));
        srcs[static_cast<size_t>(me)] = copy;
      }
      LANES_RETURN_IF_ERROR(reduceSegment(out + myBegin * elem, srcs, myLen, r, reduce_));
      LANES_CUDA_RETURN(cudaMemcpyAsync(ch.resultSlot(me, slot) + myBegin * elem,
                                        out + myBegin * elem, myLen * elem, cudaMemcpyDefault,
                                        reduce_));
    }
    LANES_RETURN_IF_ERROR(ch.post(reduce_, ch.counter(StageFlag::Reduced, me), g));
    LANES_CUDA_RETURN(cudaEventRecord(reduceDone_[half], reduce_));
    // Every stage of this chunk on this rank is done once C passes this: its
    // `consumed` then also says this rank no longer reads the peers' slots.
    LANES_CUDA_RETURN(cudaStreamWaitEvent(up_, reduceDone_[half], 0));

    // C (up): everyone else's segments, each from its owner's result slot
    // (in a shared result slot they sit contiguously around mine: two copies).
    stage.pop();
    stage.push("wait for peers, upload results", (len - myLen) * elem);
    const bool shared = ch.sharedResultSlot();
    for (int p = 0; p < n; ++p) {
      if (p == me || segEnd(p) == segBegin(p)) continue;
      LANES_RETURN_IF_ERROR(ch.await(up_, ch.counter(StageFlag::Reduced, p), g));
      if (!shared)
        LANES_CUDA_RETURN(
            cudaMemcpyAsync(out + segBegin(p) * elem, ch.resultSlot(p, slot) + segBegin(p) * elem,
                            (segEnd(p) - segBegin(p)) * elem, cudaMemcpyDefault, up_));
    }
    if (shared && myBegin > 0)
      LANES_CUDA_RETURN(
          cudaMemcpyAsync(out, ch.resultSlot(me, slot), myBegin * elem, cudaMemcpyDefault, up_));
    if (shared && myEnd < len)
      LANES_CUDA_RETURN(cudaMemcpyAsync(out + myEnd * elem, ch.resultSlot(me, slot) + myEnd * elem,
                                        (len - myEnd) * elem, cudaMemcpyDefault, up_));
    LANES_RETURN_IF_ERROR(ch.post(up_, ch.counter(StageFlag::Consumed, me), g));
  }
  return Status::ok();
}

}  // namespace lanes
