#include "exec/cuda/context_allreduce.h"

#include "base/cuda_check.h"
#include "base/env.h"
#include "base/log.h"
#include "exec/cuda/device_scope.h"
#include "kernels/cuda/reduce.h"

namespace lanes {

// A rank's part of one call. Both events belong to the offering rank (it
// alone destroys them): `ready` it records on its stream at arrival, `done`
// the actor records on the actor's stream after the work that writes this
// rank's output, and then sets `recorded`.
struct ContextAllReduce::Offer {
  const Request* request;
  cudaEvent_t ready;
  cudaEvent_t done;
  mutable bool recorded = false;
};

namespace {

// Every rank a thread of this process on this GPU (facts all ranks share).
bool oneContext(CommView comm) {
  return comm.nranks() >= 2 && comm.nranks() <= cuda::kMaxReduceSources &&
         static_cast<int>(comm.ranksSharingMyContext().size()) == comm.nranks();
}

std::string describeCall(const Request& r) {
  return std::to_string(r.args.count) + " x " + datatypeName(r.args.type) + " " +
         redOpName(r.op.kind);
}

}  // namespace

Status ContextAllReduce::create(CommView comm, std::unique_ptr<ContextAllReduce>* out) {
  out->reset();
  if (!oneContext(comm)) return Status::ok();
  // Where LANES_PROTO names ll_threads, the LL kernel serves these instead.
  if (pathAllowed(comm.selection(), DevicePath::LlThreads)) {
    LANES_INFO(Init, comm.rank(),
               "small device all-reduces between thread ranks: the LL kernel "
               "(LANES_PROTO=%s)",
               comm.selection().proto.text().c_str());
    return Status::ok();
  }
  if (!pathAllowed(comm.selection(), DevicePath::SharedContext)) {
    LANES_INFO(Init, comm.rank(),
               "small device all-reduces between thread ranks: not the shared context "
               "(LANES_PROTO=%s)",
               comm.selection().proto.text().c_str());
    return Status::ok();
  }
  DeviceScope device(comm.cudaDev());
  std::unique_ptr<ContextAllReduce> path(new ContextAllReduce(comm));
  for (cudaEvent_t* e : {&path->ready_, &path->done_})
    LANES_CUDA_RETURN(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
  path->maxBytes_ = comm.selection().sharedContextMaxBytes;
  path->meeting_ = RankMeeting::join(comm.commId(), comm.nranks());
  path->hookIndex_ = comm.addFailureHook(
      [meeting = path->meeting_, who = comm.describe()](const std::string& message) {
        // lanesRemoteError whatever the cause: a waiting peer's own
        // communicator must fail too (lanesInvalidUsage would read as a mismatch).
        meeting->poison(remoteError(who + " failed: " + message));
      });
  LANES_INFO(Init, comm.rank(),
             "small device all-reduces: every rank is a thread on this GPU; the last to call "
             "reduces for all, up to %zu bytes",
             path->maxBytes_);
  *out = std::move(path);
  return Status::ok();
}

ContextAllReduce::~ContextAllReduce() {
  if (hookIndex_ != SIZE_MAX) {
    comm_.removeFailureHook(hookIndex_);
  }
  // A stream may still wait for these: CUDA frees them once it passed.
  for (cudaEvent_t e : {ready_, done_})
    if (e != nullptr) cudaEventDestroy(e);
}

Status ContextAllReduce::enqueue(const Request& r, cudaStream_t stream) {
  DeviceScope device(comm_.cudaDev());
  LANES_RETURN_IF_ERROR(refuseCapture(
      stream,
      "capturing a small device all-reduce between thread ranks of one GPU into a CUDA Graph is "
      "refused: the ranks' streams wait for events of each other's streams, recorded by other "
      "threads, which a capture of one rank cannot hold. Issue it outside the capture, or leave "
      "the path out with LANES_PROTO=^shared_context."));
  LANES_CUDA_RETURN(cudaEventRecord(ready_, stream));
  const Offer mine{&r, ready_, done_};
  Status s = meeting_->meet(
      comm_.rank(), &mine, comm_.deadline(),
      "device all-reduce (" + describeCall(r) + ") on " + comm_.describe(),
      [this, &mine, stream](const std::vector<const void*>& offers) {
        return enqueueForAll(offers, mine, stream);
      },
      &comm_.abortFlag());
  // Also after a failed act: whatever it enqueued writes this rank's output.
  if (mine.recorded) {
    Status waited =
        cudaStatus(cudaStreamWaitEvent(stream, done_, 0), "cudaStreamWaitEvent (shared context)");
    if (s) s = waited;
  }
  if (s) {
    ++calls_;
    return s;
  }
  // Mismatched calls enqueued nothing: the communicator stays usable.
  if (s.code() != lanesInvalidUsage) comm_.fail(s.code(), s.message());
  return s;
}

Status ContextAllReduce::enqueueForAll(const std::vector<const void*>& offers, const Offer& mine,
                                       cudaStream_t stream) {
  const int n = comm_.nranks();
  std::vector<const Offer*> o;
  for (const void* p : offers) o.push_back(static_cast<const Offer*>(p));
  const Request& r0 = *o[0]->request;
  bool sameScalar = true;
  for (int r = 1; r < n; ++r) {
    const Request& q = *o[static_cast<size_t>(r)]->request;
    if (q.args.count != r0.args.count || q.args.type != r0.args.type || q.op.kind != r0.op.kind)
      return invalidUsage("ranks issued different all-reduces: rank 0 " + describeCall(r0) +
                          ", rank " + std::to_string(r) + " " + describeCall(q) +
                          "; every rank must issue the same collectives in the same order");
    sameScalar = sameScalar && q.op.scalar == r0.op.scalar;
  }
  // Once anything is on the stream it reads the peers' inputs and writes
  // their outputs: their streams must wait for it, error or not.
  Status s = reduceForAll(o, mine, sameScalar, stream);
  for (const Offer* p : o) {
    if (p == &mine) continue;
    p->recorded = cudaEventRecord(p->done, stream) == cudaSuccess;
    if (s && !p->recorded) s = cudaError("cudaEventRecord (shared context) failed");
  }
  return s;
}

Status ContextAllReduce::reduceForAll(const std::vector<const Offer*>& o, const Offer& mine,
                                      bool sameScalar, cudaStream_t stream) {
  const int n = static_cast<int>(o.size());
  for (const Offer* p : o)
    if (p != &mine) LANES_CUDA_RETURN(cudaStreamWaitEvent(stream, p->ready, 0));
  const Request& me = *mine.request;
  void* out = me.args.recv;
  const size_t count = me.args.count;
  const lanesDataType_t type = me.args.type;
  const RedOpKind op = me.op.kind;
  if (op != RedOpKind::PreMulSum || sameScalar) {
    std::vector<const void*> srcs;
    for (const Offer* p : o) srcs.push_back(p->request->args.send);
    LANES_RETURN_IF_ERROR(
        kernelStatus(cuda::launchReduce(out, srcs.data(), n, count, type, op, me.op.scalar,
                                        op == RedOpKind::Avg ? n : 0, stream),
                     "launchReduce (shared context)"));
  } else {
    // Each rank's own scalar: out = s_me * x_me first (in place, `out` may be
    // my input), then out += s_r * x_r for every other rank.
    const void* own = me.args.send;
    LANES_RETURN_IF_ERROR(
        kernelStatus(cuda::launchReduce(out, &own, 1, count, type, op, me.op.scalar, 0, stream),
                     "launchReduce (shared context, PreMulSum)"));
    for (const Offer* p : o) {
      if (p == &mine) continue;
      const void* pass[2] = {p->request->args.send, out};
      LANES_RETURN_IF_ERROR(kernelStatus(
          cuda::launchReduce(out, pass, 2, count, type, op, p->request->op.scalar, 0, stream, 1),
          "launchReduce (shared context, PreMulSum)"));
    }
  }
  const size_t bytes = count * datatypeSize(type);
  for (const Offer* p : o) {
    void* dst = p->request->args.recv;
    if (p != &mine && dst != out)
      LANES_RETURN_IF_ERROR(
          kernelStatus(cuda::launchCopy(dst, out, bytes, stream), "launchCopy (shared context)"));
  }
  return Status::ok();
}

}  // namespace lanes
