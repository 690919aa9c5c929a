// All-gather, broadcast and reduce-scatter on the host-staged path: the same
// channel (slots and counters), streams and failure handling as the
// all-reduce (staged_allreduce.cc, docs/gpu_data_path.md), other
// choreographies. Every chunk g of every rank ends with consumed[me] = g on
// up_, written once this rank has finished reading every peer's slot of that
// chunk; A (down) of chunk g waits for every rank's consumed >= g - K before
// it reuses slot g mod K. On unless a rank sets LANES_STAGED_COLLECTIVES=0.
//
// Per chunk g (slot k):
//   all-gather     A: D2H my piece of send -> in[me][k]; ready[me] = g.
//                  C: my piece send -> recv (D2D, unless in place); for each
//                     peer: wait ready[p] >= g, H2D in[p][k] -> recv block p.
//   broadcast      A (root): D2H send -> in[root][k]; ready[root] = g; send ->
//                     recv (D2D, unless in place).
//                  C (others): wait ready[root] >= g, H2D in[root][k] -> recv.
//   reduce-scatter A: D2H every peer p's block of my send into in[p][k] at
//                     offset me x len (p's inbox; without inboxes: into
//                     in[me][k] at offset p x len); ready[me] = g.
//                  B1: wait ready[p] >= g; H2D my inbox in[me][k] -> scratch
//                     in two copies (without: in[p][k] block me, per peer).
//                  B2: reduce my block of send with the uploaded ones -> recv.
//                  C: consumed after B2.
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "base/cuda_check.h"
#include "base/datatype.h"
#include "exec/staged_chunking.h"
#include "exec/cuda/staged_collectives.h"
#include "kernels/cuda/reduce.h"

namespace lanes {

using staged::pipelineChunkBytes;

namespace {
// Whole elements per chunk, at least one.
size_t chunkElements(size_t chunkBytes, size_t elem) {
  return std::max<size_t>(1, chunkBytes / elem);
}
}  // namespace

Status StagedCollectives::enqueueAllGather(const Request& r) {
  const StageChannel& ch = *channel_;
  const StageArenaLayout& layout = ch.layout();
  const int n = comm_.nranks();
  const int me = comm_.rank();
  const size_t elem = datatypeSize(r.args.type);
  const size_t count = r.args.count;  // per rank
  const size_t chunkElems =
      chunkElements(pipelineChunkBytes(layout.chunkBytes, count * elem), elem);
  const auto* send = static_cast<const std::byte*>(r.args.send);
  auto* recv = static_cast<std::byte*>(r.args.recv);
  const bool inPlace = send == recv + static_cast<size_t>(me) * count * elem;

  for (size_t off = 0; off < count; off += chunkElems) {
    const size_t len = std::min(chunkElems, count - off);
    const Chunk c = nextChunk();
    const uint32_t g = c.g;
    const int slot = c.slot;

    // A (down).
    LANES_RETURN_IF_ERROR(waitSlotFree(down_, c));
    LANES_CUDA_RETURN(cudaMemcpyAsync(ch.inputSlot(me, slot), send + off * elem, len * elem,
                                      cudaMemcpyDefault, down_));
    LANES_RETURN_IF_ERROR(ch.post(down_, ch.counter(StageFlag::Ready, me), g));
    LANES_CUDA_RETURN(cudaEventRecord(downDone_, down_));

    // C (up): after A, which orders it after the user's stream.
    LANES_CUDA_RETURN(cudaStreamWaitEvent(up_, downDone_, 0));
    if (!inPlace)
      LANES_CUDA_RETURN(cudaMemcpyAsync(recv + (static_cast<size_t>(me) * count + off) * elem,
                                        send + off * elem, len * elem, cudaMemcpyDeviceToDevice,
                                        up_));
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      LANES_RETURN_IF_ERROR(ch.await(up_, ch.counter(StageFlag::Ready, p), g));
      LANES_CUDA_RETURN(cudaMemcpyAsync(recv + (static_cast<size_t>(p) * count + off) * elem,
                                        ch.inputSlot(p, slot), len * elem, cudaMemcpyDefault, up_));
    }
    LANES_RETURN_IF_ERROR(ch.post(up_, ch.counter(StageFlag::Consumed, me), g));
  }
  return Status::ok();
}

Status StagedCollectives::enqueueBroadcast(const Request& r) {
  const StageChannel& ch = *channel_;
  const StageArenaLayout& layout = ch.layout();
  const int me = comm_.rank();
  const int root = r.args.root;
  const size_t elem = datatypeSize(r.args.type);
  const size_t count = r.args.count;
  const size_t chunkElems =
      chunkElements(pipelineChunkBytes(layout.chunkBytes, count * elem), elem);
  const auto* send = static_cast<const std::byte*>(r.args.send);
  auto* recv = static_cast<std::byte*>(r.args.recv);

  for (size_t off = 0; off < count; off += chunkElems) {
    const size_t len = std::min(chunkElems, count - off);
    const Chunk c = nextChunk();
    const uint32_t g = c.g;
    const int slot = c.slot;

    // A (down): the root's slot is free once every rank consumed its last use.
    if (me == root) {
      LANES_RETURN_IF_ERROR(waitSlotFree(down_, c));
      LANES_CUDA_RETURN(cudaMemcpyAsync(ch.inputSlot(root, slot), send + off * elem, len * elem,
                                        cudaMemcpyDefault, down_));
      LANES_RETURN_IF_ERROR(ch.post(down_, ch.counter(StageFlag::Ready, root), g));
    }
    LANES_CUDA_RETURN(cudaEventRecord(downDone_, down_));

    // C (up).
    LANES_CUDA_RETURN(cudaStreamWaitEvent(up_, downDone_, 0));
    if (me == root) {
      if (send != recv)
        LANES_CUDA_RETURN(cudaMemcpyAsync(recv + off * elem, send + off * elem, len * elem,
                                          cudaMemcpyDeviceToDevice, up_));
    } else {
      LANES_RETURN_IF_ERROR(ch.await(up_, ch.counter(StageFlag::Ready, root), g));
      LANES_CUDA_RETURN(cudaMemcpyAsync(recv + off * elem, ch.inputSlot(root, slot), len * elem,
                                        cudaMemcpyDefault, up_));
    }
    LANES_RETURN_IF_ERROR(ch.post(up_, ch.counter(StageFlag::Consumed, me), g));
  }
  return Status::ok();
}

Status StagedCollectives::enqueueReduceScatter(const Request& r) {
  const StageChannel& ch = *channel_;
  const StageArenaLayout& layout = ch.layout();
  const int n = comm_.nranks();
  const int me = comm_.rank();
  const size_t elem = datatypeSize(r.args.type);
  const size_t count = r.args.count;  // per rank (recvcount)
  // The slot holds one piece per rank; pieces start 16-byte aligned.
  const size_t align = std::max<size_t>(1, 16 / elem);
  const size_t perRank = pipelineChunkBytes(layout.chunkBytes, count * elem * n) / n;
  const size_t chunkElems = std::max(align, perRank / elem / align * align);
  const auto* send = static_cast<const std::byte*>(r.args.send);
  auto* recv = static_cast<std::byte*>(r.args.recv);
  const bool inPlace = recv == send + static_cast<size_t>(me) * count * elem;
  auto* scratch = static_cast<std::byte*>(scratch_);

  for (size_t off = 0; off < count; off += chunkElems) {
    const size_t len = std::min(chunkElems, count - off);
    const Chunk c = nextChunk();
    const uint32_t g = c.g;
    const int slot = c.slot;
    auto piece = [&](int p) { return static_cast<size_t>(p) * chunkElems * elem; };
    auto block = [&](int p) { return send + (static_cast<size_t>(p) * count + off) * elem; };

    // A (down): every peer's block of my input, into the peer's inbox or my
    // own slot (no inboxes); see uploadPieces.
    LANES_RETURN_IF_ERROR(waitSlotFree(down_, c));
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      std::byte* dst =
          ch.inbox() ? ch.inputSlot(p, slot) + piece(me) : ch.inputSlot(me, slot) + piece(p);
      LANES_CUDA_RETURN(cudaMemcpyAsync(dst, block(p), len * elem, cudaMemcpyDefault, down_));
    }
    LANES_RETURN_IF_ERROR(ch.post(down_, ch.counter(StageFlag::Ready, me), g));
    LANES_CUDA_RETURN(cudaEventRecord(downDone_, down_));

    // B1 (upload): every peer's piece for me, into this chunk's scratch half.
    const int half = static_cast<int>(c.issued % 2);
    std::byte* scratchHalf =
        scratch + static_cast<size_t>(half) * scratchSegments_ * scratchStride_;
    LANES_CUDA_RETURN(cudaStreamWaitEvent(upload_, reduceDone_[half], 0));
    std::vector<const void*> srcs(static_cast<size_t>(n));
    LANES_RETURN_IF_ERROR(
        uploadPieces(slot, g, chunkElems * elem, len * elem, piece(me), scratchHalf, &srcs));
    LANES_CUDA_RETURN(cudaEventRecord(uploadDone_, upload_));

    // B2 (reduce): my block of send with the uploaded pieces, into recv.
    LANES_CUDA_RETURN(cudaStreamWaitEvent(reduce_, downDone_, 0));
    LANES_CUDA_RETURN(cudaStreamWaitEvent(reduce_, uploadDone_, 0));
    srcs[static_cast<size_t>(me)] = block(me);
    if (inPlace && me >= cuda::kMaxReduceSources) {
      // A first pass of 8 sources would overwrite my block before a later
      // pass reads it (as in the all-reduce).
      std::byte* copy = scratchHalf + piece(n - 1);
      LANES_CUDA_RETURN(
          cudaMemcpyAsync(copy, block(me), len * elem, cudaMemcpyDeviceToDevice, reduce_));
      srcs[static_cast<size_t>(me)] = copy;
    }
    LANES_RETURN_IF_ERROR(reduceSegment(recv + off * elem, srcs, len, r, reduce_));
    LANES_CUDA_RETURN(cudaEventRecord(reduceDone_[half], reduce_));

    // C: nothing comes up; consumed once this rank read every peer's slot.
    LANES_CUDA_RETURN(cudaStreamWaitEvent(up_, reduceDone_[half], 0));
    LANES_RETURN_IF_ERROR(ch.post(up_, ch.counter(StageFlag::Consumed, me), g));
  }
  return Status::ok();
}

}  // namespace lanes
