// The library a perf tool times, behind one interface: Lanes (the default)
// or NCCL opened at run time (--backend nccl, --compare nccl). The driver's
// own traffic (barriers, timing reductions, the data check's tallies) always
// goes over the Lanes communicator; only the timed collective goes through a
// CollBackend.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "lanes/lanes.h"

namespace lanes::perf {

class CollBackend {
 public:
  virtual ~CollBackend() = default;
  virtual const char* name() const = 0;  // "lanes" | "nccl"
  // What the header says about it, e.g. "NCCL 2.28.9 (libnccl.so.2)".
  virtual std::string describe() const = 0;
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

  virtual Status allReduce(const void* s, void* r, size_t n, lanesDataType_t t, lanesRedOp_t op,
                           cudaStream_t st) = 0;
  virtual Status allGather(const void* s, void* r, size_t n, lanesDataType_t t,
                           cudaStream_t st) = 0;
  virtual Status reduceScatter(const void* s, void* r, size_t n, lanesDataType_t t, lanesRedOp_t op,
                               cudaStream_t st) = 0;
  virtual Status broadcast(const void* s, void* r, size_t n, lanesDataType_t t, int root,
                           cudaStream_t st) = 0;
  virtual Status reduce(const void* s, void* r, size_t n, lanesDataType_t t, lanesRedOp_t op,
                        int root, cudaStream_t st) = 0;
  virtual Status send(const void* s, size_t n, lanesDataType_t t, int peer, cudaStream_t st) = 0;
  virtual Status recv(void* r, size_t n, lanesDataType_t t, int peer, cudaStream_t st) = 0;
  virtual Status groupStart() = 0;
  virtual Status groupEnd() = 0;
  // Lanes has these natively; the base builds them from grouped send/recv,
  // as nccl-tests does for NCCL.
  virtual Status allToAll(const void* s, void* r, size_t n, lanesDataType_t t, cudaStream_t st);
  virtual Status gather(const void* s, void* r, size_t n, lanesDataType_t t, int root,
                        cudaStream_t st);
  virtual Status scatter(const void* s, void* r, size_t n, lanesDataType_t t, int root,
                         cudaStream_t st);
  // Ends the communicator after a failed call so peers do not wait on it.
  virtual void abort() = 0;

 protected:
  int rank_ = 0, nranks_ = 1;
};

// Lanes through `comm` (not owned: the driver's communicator).
std::unique_ptr<CollBackend> makeLanesBackend(lanesComm_t comm);

}  // namespace lanes::perf
