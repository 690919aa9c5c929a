// CollBackend over the Lanes C API, and the base's grouped send/recv forms.
#include <string>

#include "perf/backend.h"
#include "perf/element.h"

namespace lanes::perf {
namespace {

class LanesBackend final : public CollBackend {
 public:
  explicit LanesBackend(lanesComm_t comm) : comm_(comm) {
    lanesCommUserRank(comm, &rank_);
    lanesCommCount(comm, &nranks_);
  }
  const char* name() const override { return "lanes"; }
  std::string describe() const override { return "Lanes (this build)"; }

  Status allReduce(const void* s, void* r, size_t n, lanesDataType_t t, lanesRedOp_t op,
                   cudaStream_t st) override {
    return check(lanesAllReduce(s, r, n, t, op, comm_, st), "lanesAllReduce");
  }
  Status allGather(const void* s, void* r, size_t n, lanesDataType_t t, cudaStream_t st) override {
    return check(lanesAllGather(s, r, n, t, comm_, st), "lanesAllGather");
  }
  Status reduceScatter(const void* s, void* r, size_t n, lanesDataType_t t, lanesRedOp_t op,
                       cudaStream_t st) override {
    return check(lanesReduceScatter(s, r, n, t, op, comm_, st), "lanesReduceScatter");
  }
  Status broadcast(const void* s, void* r, size_t n, lanesDataType_t t, int root,
                   cudaStream_t st) override {
    return check(lanesBroadcast(s, r, n, t, root, comm_, st), "lanesBroadcast");
  }
  Status reduce(const void* s, void* r, size_t n, lanesDataType_t t, lanesRedOp_t op, int root,
                cudaStream_t st) override {
    return check(lanesReduce(s, r, n, t, op, root, comm_, st), "lanesReduce");
  }
  Status send(const void* s, size_t n, lanesDataType_t t, int peer, cudaStream_t st) override {
    return check(lanesSend(s, n, t, peer, comm_, st), "lanesSend");
  }
  Status recv(void* r, size_t n, lanesDataType_t t, int peer, cudaStream_t st) override {
    return check(lanesRecv(r, n, t, peer, comm_, st), "lanesRecv");
  }
  Status groupStart() override { return check(lanesGroupStart(), "lanesGroupStart"); }
  Status groupEnd() override { return check(lanesGroupEnd(), "lanesGroupEnd"); }
  Status allToAll(const void* s, void* r, size_t n, lanesDataType_t t, cudaStream_t st) override {
    return check(lanesAlltoAll(s, r, n, t, comm_, st), "lanesAlltoAll");
  }
  Status gather(const void* s, void* r, size_t n, lanesDataType_t t, int root,
                cudaStream_t st) override {
    return check(lanesGather(s, r, n, t, root, comm_, st), "lanesGather");
  }
  Status scatter(const void* s, void* r, size_t n, lanesDataType_t t, int root,
                 cudaStream_t st) override {
    return check(lanesScatter(s, r, n, t, root, comm_, st), "lanesScatter");
  }
  void abort() override { lanesCommAbort(comm_); }

 private:
  Status check(lanesResult_t r, const char* call) const {
    if (r == lanesSuccess) return Status::ok();
    return Status(r, std::string(call) + " failed: " + lanesGetErrorString(r) + ": " +
                         lanesGetLastError(comm_));
  }
  lanesComm_t comm_;
};

}  // namespace

std::unique_ptr<CollBackend> makeLanesBackend(lanesComm_t comm) {
  return std::make_unique<LanesBackend>(comm);
}

// Grouped send/recv forms (nccl-tests' alltoall.cu, gather.cu, scatter.cu).
Status CollBackend::allToAll(const void* s, void* r, size_t n, lanesDataType_t t, cudaStream_t st) {
  const size_t bytes = n * elementSize(t);
  LANES_RETURN_IF_ERROR(groupStart());
  Status first = Status::ok();
  for (int p = 0; p < nranks_ && first; ++p) {
    first = send(static_cast<const char*>(s) + p * bytes, n, t, p, st);
    if (first) first = recv(static_cast<char*>(r) + p * bytes, n, t, p, st);
  }
  Status end = groupEnd();
  return first ? std::move(end) : std::move(first);
}

Status CollBackend::gather(const void* s, void* r, size_t n, lanesDataType_t t, int root,
                           cudaStream_t st) {
  const size_t bytes = n * elementSize(t);
  LANES_RETURN_IF_ERROR(groupStart());
  Status first = Status::ok();
  if (rank_ == root) {
    for (int p = 0; p < nranks_ && first; ++p)
      first = recv(static_cast<char*>(r) + p * bytes, n, t, p, st);
  }
  if (first) first = send(s, n, t, root, st);
  Status end = groupEnd();
  return first ? std::move(end) : std::move(first);
}

Status CollBackend::scatter(const void* s, void* r, size_t n, lanesDataType_t t, int root,
                            cudaStream_t st) {
  const size_t bytes = n * elementSize(t);
  LANES_RETURN_IF_ERROR(groupStart());
  Status first = Status::ok();
  if (rank_ == root) {
    for (int p = 0; p < nranks_ && first; ++p)
      first = send(static_cast<const char*>(s) + p * bytes, n, t, p, st);
  }
  if (first) first = recv(r, n, t, root, st);
  Status end = groupEnd();
  return first ? std::move(end) : std::move(first);
}

}  // namespace lanes::perf
