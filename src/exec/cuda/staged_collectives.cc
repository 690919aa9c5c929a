// Routing of device requests to the host-staged path, the batch around the
// choreographies (capture refusal, stream joins, the watchdog's bracket), and
// what the choreographies share: the chunk sequence, the slot-reuse wait, the
// peers' pieces uploaded for a reduction, and the reduce kernels. The
// choreographies themselves: staged_allreduce.cc, staged_gather_scatter.cc,
// staged_sendrecv.cc; setup and teardown: staged_setup.cc.
#include "exec/cuda/staged_collectives.h"

#include <algorithm>
#include <string>
#include <utility>

#include "base/cuda_check.h"
#include "exec/cuda/device_scope.h"
#include "exec/cuda/stream_join.h"
#include "kernels/cuda/reduce.h"

namespace lanes {

Status StagedCollectives::setUp(CommView comm) {
  // Thread ranks beside ranks of other processes stay on the proxy: a thread
  // rank's wait for another process's counter can depend, through that
  // process, on a write of a thread peer queued behind the wait, and the
  // submit ledger orders only this process's writes (docs/gpu_data_path.md).
  if (comm.threadsBesideProcesses() || !comm.allOnOneHost()) return Status::ok();
  std::lock_guard<std::mutex> lock(comm.paths().mutex);
  if (comm.paths().staged) return Status::ok();
  std::unique_ptr<StagedCollectives> staged(new StagedCollectives(comm));
  Status s = staged->setup();
  comm.paths().staged = std::move(staged);
  if (!s) comm.fail(s.code(), s.message());
  return s;
}

Status StagedCollectives::enqueue(std::vector<Request>& requests, cudaStream_t stream,
                                  bool hostSum) {
  DeviceScope device(comm_.cudaDev());
  const std::vector<cudaStream_t> others = otherStreams(requests, stream);
  std::vector<cudaStream_t> streams{stream};
  streams.insert(streams.end(), others.begin(), others.end());
  for (cudaStream_t s : streams) {
    LANES_RETURN_IF_ERROR(refuseCapture(
        s,
        "capturing a Lanes collective on device buffers into a CUDA Graph is refused: the "
        "host-staged path orders ranks by chunk counters written into the streams, and a "
        "graph replay would repeat the captured counters instead of taking new ones. Issue "
        "the collective outside the capture (or set LANES_PROTO=^staged to get the proxy's "
        "behaviour, which refuses capture too)."));
  }

  // Join: the group's other streams feed `stream`; they wait for it after.
  LANES_RETURN_IF_ERROR(joinStreams(stream, others));

  if (comm_.nranks() == 1) {
    // One rank: recv = op(send) (Avg divides by 1, PreMulSum scales); the
    // gathers copy.
    for (const Request& r : requests) {
      if (r.args.count == 0) continue;
      if (r.args.coll == CollType::AllGather || r.args.coll == CollType::Broadcast) {
        if (r.args.send != r.args.recv)
          LANES_CUDA_RETURN(cudaMemcpyAsync(r.args.recv, r.args.send,
                                            r.args.count * datatypeSize(r.args.type),
                                            cudaMemcpyDeviceToDevice, stream));
        continue;
      }
      const void* src = r.args.send;
      LANES_RETURN_IF_ERROR(kernelStatus(
          cuda::launchReduce(r.args.recv, &src, 1, r.args.count, r.args.type, r.op.kind,
                             r.op.scalar, r.op.kind == RedOpKind::Avg ? 1 : 0, stream),
          "launchReduce (single rank)"));
    }
  } else {
    StagedWatchdog::Batch batch;
    LANES_RETURN_IF_ERROR(watchdog_->takeEvent(&batch.start));
    Status s = watchdog_->takeEvent(&batch.done);
    if (!s) {
      cudaEventDestroy(batch.start);
      return s;
    }
    const bool pairs = requests.front().isP2p;  // the chooser's pairs: all or none
    if (!pairs)
      batch.label = std::string("device ") + collTypeName(requests.front().args.coll) +
                    (hostSum ? " (host summation), " : " (host-staged), ") +
                    std::to_string(requests.size()) + " request(s) from chunk " +
                    std::to_string(chunksIssued_ + 1);
    s = cudaStatus(cudaEventRecord(batch.start, stream), "cudaEventRecord (start)");
    if (s) s = cudaStatus(cudaStreamWaitEvent(down_, batch.start, 0), "cudaStreamWaitEvent");
    const uint64_t firstChunk = chunksIssued_ + pairChunksIssued_;
    if (pairs) {
      // Receives write the user's buffers on up_: after the user's stream too.
      if (s) s = cudaStatus(cudaStreamWaitEvent(up_, batch.start, 0), "cudaStreamWaitEvent");
      if (s) s = enqueuePairs(requests, &batch);
    } else {
      for (size_t i = 0; s && i < requests.size(); ++i) s = enqueueOne(requests[i], hostSum);
    }
    // Every choreography ends on up_ (the collectives' `consumed` writes; the
    // pairs join down_ into it).
    if (s) s = cudaStatus(cudaEventRecord(batch.done, up_), "cudaEventRecord (done)");
    if (s) s = cudaStatus(cudaStreamWaitEvent(stream, batch.done, 0), "cudaStreamWaitEvent");
    batch.lastChunk = static_cast<uint32_t>(chunksIssued_);
    if (!s && chunksIssued_ + pairChunksIssued_ != firstChunk) {
      // Counters of this batch may already be in the streams while others
      // are missing: peers would wait for them forever. Fail (and poison).
      comm_.fail(s.code(), "enqueueing a device collective on the CUDA streams failed on " +
                               comm_.describe() + ": " + s.message());
    }
    watchdog_->track(std::move(batch));
    LANES_RETURN_IF_ERROR(s);
  }
  LANES_RETURN_IF_ERROR(forkStreams(stream, others));
  return Status::ok();
}

Status StagedCollectives::enqueueOne(const Request& r, bool hostSum) {
  switch (r.args.coll) {
    case CollType::AllReduce:
      return hostSum ? enqueueHostSumAllReduce(r) : enqueueAllReduce(r);
    case CollType::AllGather:
      return enqueueAllGather(r);
    case CollType::Broadcast:
      return enqueueBroadcast(r);
    case CollType::ReduceScatter:
      return hostSum ? enqueueHostSumReduceScatter(r) : enqueueReduceScatter(r);
    default:
      return invalidUsage(std::string("the host-staged path does not serve ") +
                          collTypeName(r.args.coll));
  }
}

Status StagedCollectives::reduceSegment(void* dst, const std::vector<const void*>& srcs,
                                        size_t count, const Request& r, cudaStream_t stream) {
  const RedOpKind op = r.op.kind;
  const int nranks = static_cast<int>(srcs.size());
  const int first = std::min(nranks, cuda::kMaxReduceSources);
  const bool onePass = first == nranks;
  LANES_RETURN_IF_ERROR(
      kernelStatus(cuda::launchReduce(dst, srcs.data(), first, count, r.args.type, op, r.op.scalar,
                                      (op == RedOpKind::Avg && onePass) ? nranks : 0, stream),
                   "launchReduce"));
  // More than 8 ranks: fold the rest in, 7 at a time, into the partial result.
  for (int done = first; done < nranks;) {
    const int take = std::min(nranks - done, cuda::kMaxReduceSources - 1);
    const bool last = done + take == nranks;
    std::vector<const void*> pass;
    if (op == RedOpKind::PreMulSum) {
      // The new sources are scaled, the partial sum (already scaled) is not.
      pass.assign(srcs.begin() + done, srcs.begin() + done + take);
      pass.push_back(dst);
    } else {
      pass.push_back(dst);
      pass.insert(pass.end(), srcs.begin() + done, srcs.begin() + done + take);
    }
    LANES_RETURN_IF_ERROR(kernelStatus(
        cuda::launchReduce(dst, pass.data(), static_cast<int>(pass.size()), count, r.args.type, op,
                           r.op.scalar, (op == RedOpKind::Avg && last) ? nranks : 0, stream, take),
        "launchReduce"));
    done += take;
  }
  return Status::ok();
}

StagedCollectives::Chunk StagedCollectives::nextChunk() {
  Chunk c;
  c.issued = ++chunksIssued_;
  c.g = static_cast<uint32_t>(c.issued);
  c.slot = static_cast<int>(c.issued % static_cast<uint64_t>(channel_->layout().slots));
  watchdog_->noteChunk(c.g);
  return c;
}

Status StagedCollectives::waitSlotFree(cudaStream_t stream, const Chunk& c) const {
  const auto slots = static_cast<uint64_t>(channel_->layout().slots);
  if (c.issued <= slots) return Status::ok();
  for (int p = 0; p < comm_.nranks(); ++p)
    LANES_RETURN_IF_ERROR(channel_->await(stream, channel_->counter(StageFlag::Consumed, p),
                                          static_cast<uint32_t>(c.issued - slots)));
  return Status::ok();
}

Status StagedCollectives::uploadPieces(int slot, uint32_t g, size_t stride, size_t bytes,
                                       size_t offsetInPeerSlot, std::byte* scratch,
                                       std::vector<const void*>* srcs) const {
  const int n = comm_.nranks();
  const int me = comm_.rank();
  const StageChannel& ch = *channel_;
  // The peers below me, then those above: from the inbox each run is one copy
  // (with the gaps of pieces shorter than the stride, never read).
  for (auto [first, last] : {std::pair{0, me}, std::pair{me + 1, n}}) {
    if (first == last) continue;
    const size_t at = static_cast<size_t>(first < me ? first : first - 1);
    for (int p = first; p < last; ++p) {
      std::byte* dst = scratch + (at + static_cast<size_t>(p - first)) * stride;
      LANES_RETURN_IF_ERROR(ch.await(upload_, ch.counter(StageFlag::Ready, p), g));
      if (!ch.inbox())
        LANES_CUDA_RETURN(cudaMemcpyAsync(dst, ch.inputSlot(p, slot) + offsetInPeerSlot, bytes,
                                          cudaMemcpyDefault, upload_));
      (*srcs)[static_cast<size_t>(p)] = dst;
    }
    if (ch.inbox())
      LANES_CUDA_RETURN(cudaMemcpyAsync(
          scratch + at * stride, ch.inputSlot(me, slot) + static_cast<size_t>(first) * stride,
          static_cast<size_t>(last - first - 1) * stride + bytes, cudaMemcpyDefault, upload_));
  }
  return Status::ok();
}

}  // namespace lanes
