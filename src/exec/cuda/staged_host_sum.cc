// Host summation: all-reduce and reduce-scatter of device buffers summed by
// CPU threads where the bytes already are, in the staging arena's host
// memory (the BytePS idea; docs/gpu_data_path.md, "Host summation"). Per
// chunk g (slot g % K), on the staged path's streams and counters:
//   A (down):  wait every rank's `consumed` >= g-K; D2H my chunk into my
//              input slot (a reduce-scatter: each rank's block of it, side
//              by side); ready[me] = g.
//   H (host):  my reducer waits for every rank's `ready` >= g, sums my
//              segment of every rank's input slot in rank order into the
//              result slot, and sets reduced[me] = g from the CPU.
//   C (up):    wait `reduced` of every owner I read; H2D the result (all of
//              the chunk, or my segment); consumed[me] = g.
// Each GPU moves its chunk down once and the result up once, against
// 2(N-1)/N of it up on the staged path, and runs no kernel. Every segment is
// summed once, by its owner, so every rank gets the same bits.
//
// With a compressed wire (LANES_WIRE, float32 sums): A first encodes the
// chunk into frames in GPU memory (kernels/cuda/wire_codec.h) and moves the
// frames down; the reducers decode and add in float32 and encode the sum;
// C moves the sum's frames up and decodes them. Segments then start at a
// frame, so each rank's share is whole frames. Every rank decodes the same
// frames, so the bits still agree.
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "base/cuda_check.h"
#include "base/datatype.h"
#include "base/log.h"
#include "exec/cuda/staged_collectives.h"
#include "exec/staged_chunking.h"
#include "kernels/cuda/wire_codec.h"

namespace lanes {

using staged::ceilDiv;
using staged::roundUp;

WireFormat StagedCollectives::hostSumWire(const Request& r) const {
  const WireFormat wire = comm_.selection().wire;
  if (wireScratch_ == nullptr || r.args.type != lanesFloat32) return WireFormat::Native;
  const RedOpKind op = r.op.kind;
  const bool sum = op == RedOpKind::Sum || op == RedOpKind::Avg || op == RedOpKind::PreMulSum;
  return sum ? wire : WireFormat::Native;
}

Status StagedCollectives::pushHostSum(const Request& r, const Chunk& c, size_t offset, size_t count,
                                      WireFormat wire) {
  const StageChannel& ch = *channel_;
  const int n = comm_.nranks();
  const int me = comm_.rank();
  if (!reducer_) {
    cpu_set_t near;
    const bool pin = comm_.gpuLocalCpus(&near);
    reducer_ = std::make_unique<HostReducer>(hostSumThreads_,
                                             pin ? std::optional<cpu_set_t>(near) : std::nullopt);
    LANES_INFO(Coll, me, "device collectives: host summation by %d reducer thread(s)%s",
               hostSumThreads_, pin ? " on the GPU's NUMA node" : "");
  }
  HostReducer::Job job;
  job.g = c.g;
  for (int p = 0; p < n; ++p) {
    job.ready.push_back(ch.counter(StageFlag::Ready, p).flag);
    job.srcs.push_back(ch.inputSlot(p, c.slot) + offset);
  }
  job.dst = ch.resultSlot(me, c.slot) + offset;
  job.count = count;
  job.type = r.args.type;
  job.op = r.op.kind;
  job.scalar = r.op.scalar;
  job.avgRanks = r.op.kind == RedOpKind::Avg ? n : 0;
  const StageCounter reduced = ch.counter(StageFlag::Reduced, me);
  job.done = reduced.flag;
  job.wire = wire;
  reducer_->push(std::move(job));
  // The reducer's write of `reduced` follows every rank's `ready`: only once
  // this process's ranks have issued theirs may a wait for it be enqueued
  // (else a stream parked on it could hold up a queue those writes sit in;
  // transport/channel/submit_ledger.h). Then this process's other ranks may
  // enqueue their waits for it.
  for (int p = 0; p < n; ++p)
    if (p != me) LANES_RETURN_IF_ERROR(ch.awaitIssued(ch.counter(StageFlag::Ready, p), c.g));
  ch.noteIssued(reduced, c.g);
  return Status::ok();
}

Status StagedCollectives::enqueueHostSumAllReduce(const Request& r) {
  const StageChannel& ch = *channel_;
  const int n = comm_.nranks();
  const int me = comm_.rank();
  const size_t elem = datatypeSize(r.args.type);
  const size_t count = r.args.count;
  const WireFormat wire = hostSumWire(r);
  const bool framed = wire != WireFormat::Native;
  const WireCodec codec(wire);
  // Segments start 16-byte aligned, or at a frame.
  const size_t align = framed ? codec.frameElems() : std::max<size_t>(1, 16 / elem);
  const size_t chunkElems = staged::allReduceChunkElems(ch.layout().chunkBytes, count, elem,
                                                        static_cast<size_t>(n), align);
  // Bytes of `elems` values as they lie in the slots; of a frame-aligned offset.
  auto slotBytes = [&](size_t elems) { return framed ? codec.wireBytes(elems) : elems * elem; };
  const auto* send = static_cast<const std::byte*>(r.args.send);
  auto* recv = static_cast<std::byte*>(r.args.recv);

  for (size_t off = 0; off < count; off += chunkElems) {
    const size_t len = std::min(chunkElems, count - off);
    const Chunk c = nextChunk();
    const size_t seg = roundUp(ceilDiv(len, static_cast<size_t>(n)), align);
    const size_t myBegin = std::min(len, seg * static_cast<size_t>(me));
    const size_t myLen = std::min(len, myBegin + seg) - myBegin;

    // A (down): in place is safe, the input is down (or encoded) before C writes it.
    LANES_RETURN_IF_ERROR(waitSlotFree(down_, c));
    const std::byte* down = send + off * elem;
    if (framed) {
      LANES_CUDA_RETURN(static_cast<cudaError_t>(cuda::launchWireEncode(
          wire, reinterpret_cast<const float*>(down), len, wireScratch_, down_)));
      down = wireScratch_;
    }
    LANES_CUDA_RETURN(
        cudaMemcpyAsync(ch.inputSlot(me, c.slot), down, slotBytes(len), cudaMemcpyDefault, down_));
    LANES_RETURN_IF_ERROR(ch.post(down_, ch.counter(StageFlag::Ready, me), c.g));

    // H (host): my segment of every rank's chunk.
    LANES_RETURN_IF_ERROR(pushHostSum(r, c, slotBytes(myBegin), myLen, wire));

    // C (up): once every owner summed its segment, the whole chunk, which
    // the owners' segments fill side by side in the one result slot.
    for (int p = 0; p < n; ++p)
      if (p != me) LANES_RETURN_IF_ERROR(ch.await(up_, ch.counter(StageFlag::Reduced, p), c.g));
    LANES_RETURN_IF_ERROR(ch.await(up_, ch.counter(StageFlag::Reduced, me), c.g));
    std::byte* up = framed ? upWireScratch() : recv + off * elem;
    LANES_CUDA_RETURN(
        cudaMemcpyAsync(up, ch.resultSlot(me, c.slot), slotBytes(len), cudaMemcpyDefault, up_));
    LANES_RETURN_IF_ERROR(ch.post(up_, ch.counter(StageFlag::Consumed, me), c.g));
    if (framed)
      LANES_CUDA_RETURN(static_cast<cudaError_t>(
          cuda::launchWireDecode(wire, up, len, reinterpret_cast<float*>(recv + off * elem), up_)));
  }
  return Status::ok();
}

Status StagedCollectives::enqueueHostSumReduceScatter(const Request& r) {
  const StageChannel& ch = *channel_;
  const int n = comm_.nranks();
  const int me = comm_.rank();
  const size_t elem = datatypeSize(r.args.type);
  const size_t count = r.args.count;  // per rank (recvcount)
  const WireFormat wire = hostSumWire(r);
  const bool framed = wire != WireFormat::Native;
  const WireCodec codec(wire);
  // The slot holds one block per rank; blocks start 16-byte aligned, or at a frame.
  const size_t align = framed ? codec.frameElems() : std::max<size_t>(1, 16 / elem);
  const size_t perRank = staged::pipelineChunkBytes(ch.layout().chunkBytes, count * elem * n) / n;
  const size_t chunkElems = std::max(align, perRank / elem / align * align);
  const size_t stride = framed ? codec.wireBytes(chunkElems) : chunkElems * elem;
  const auto* send = static_cast<const std::byte*>(r.args.send);
  auto* recv = static_cast<std::byte*>(r.args.recv);

  for (size_t off = 0; off < count; off += chunkElems) {
    const size_t len = std::min(chunkElems, count - off);
    const size_t bytes = framed ? codec.wireBytes(len) : len * elem;  // one block in a slot
    const Chunk c = nextChunk();
    auto block = [&](int p) { return static_cast<size_t>(p) * stride; };
    auto input = [&](int p) { return send + (static_cast<size_t>(p) * count + off) * elem; };

    // A (down): every rank's block of my input, side by side in my slot. In
    // place (recv is my block of send), C writes it only after this.
    LANES_RETURN_IF_ERROR(waitSlotFree(down_, c));
    if (framed) {
      // Encoded side by side in GPU memory, then down in one copy.
      for (int p = 0; p < n; ++p)
        LANES_CUDA_RETURN(static_cast<cudaError_t>(cuda::launchWireEncode(
            wire, reinterpret_cast<const float*>(input(p)), len, wireScratch_ + block(p), down_)));
      LANES_CUDA_RETURN(cudaMemcpyAsync(ch.inputSlot(me, c.slot), wireScratch_,
                                        block(n - 1) + bytes, cudaMemcpyDefault, down_));
    } else {
      for (int p = 0; p < n; ++p)
        LANES_CUDA_RETURN(cudaMemcpyAsync(ch.inputSlot(me, c.slot) + block(p), input(p), bytes,
                                          cudaMemcpyDefault, down_));
    }
    LANES_RETURN_IF_ERROR(ch.post(down_, ch.counter(StageFlag::Ready, me), c.g));

    // H (host): my block of every rank's slot.
    LANES_RETURN_IF_ERROR(pushHostSum(r, c, block(me), len, wire));

    // C (up): my sum alone.
    LANES_RETURN_IF_ERROR(ch.await(up_, ch.counter(StageFlag::Reduced, me), c.g));
    std::byte* up = framed ? upWireScratch() : recv + off * elem;
    LANES_CUDA_RETURN(
        cudaMemcpyAsync(up, ch.resultSlot(me, c.slot) + block(me), bytes, cudaMemcpyDefault, up_));
    LANES_RETURN_IF_ERROR(ch.post(up_, ch.counter(StageFlag::Consumed, me), c.g));
    if (framed)
      LANES_CUDA_RETURN(static_cast<cudaError_t>(
          cuda::launchWireDecode(wire, up, len, reinterpret_cast<float*>(recv + off * elem), up_)));
  }
  return Status::ok();
}

}  // namespace lanes
