// NCCL through dlopen: only the entry points the perf tools call, declared
// here with NCCL's C ABI (enums are ints; Lanes' datatype and op numbers are
// NCCL's, see the checks below), so no NCCL header or library is needed to
// build.
#include "perf/backend_nccl.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "perf/element.h"

namespace lanes::perf {

// Lanes numbers datatypes and ops as NCCL does (ncclInt8 = 0 ... ncclFloat8e5m2
// = 11; ncclSum = 0 ... ncclAvg = 4): the values pass through unchanged.
static_assert(lanesInt8 == 0 && lanesUint8 == 1 && lanesInt32 == 2 && lanesUint32 == 3 &&
              lanesInt64 == 4 && lanesUint64 == 5 && lanesFloat16 == 6 && lanesFloat32 == 7 &&
              lanesFloat64 == 8 && lanesBfloat16 == 9 && lanesFloat8e4m3 == 10 &&
              lanesFloat8e5m2 == 11);
static_assert(lanesSum == 0 && lanesProd == 1 && lanesMax == 2 && lanesMin == 3 && lanesAvg == 4);

namespace {

using NcclComm = void*;  // ncclComm_t
using NcclResult = int;  // ncclResult_t; 0 is ncclSuccess

struct DlClose {
  void operator()(void* h) const { dlclose(h); }
};

}  // namespace

class NcclLibrary {
 public:
  std::unique_ptr<void, DlClose> handle;
  std::string name;
  NcclResult (*getVersion)(int*) = nullptr;
  NcclResult (*getUniqueId)(NcclId*) = nullptr;
  NcclResult (*commInitRank)(NcclComm*, int, NcclId, int) = nullptr;
  NcclResult (*commDestroy)(NcclComm) = nullptr;
  NcclResult (*commAbort)(NcclComm) = nullptr;
  const char* (*getErrorString)(NcclResult) = nullptr;
  const char* (*getLastError)(NcclComm) = nullptr;  // NCCL >= 2.13; may stay null
  NcclResult (*allReduce)(const void*, void*, size_t, int, int, NcclComm, cudaStream_t) = nullptr;
  NcclResult (*allGather)(const void*, void*, size_t, int, NcclComm, cudaStream_t) = nullptr;
  NcclResult (*reduceScatter)(const void*, void*, size_t, int, int, NcclComm,
                              cudaStream_t) = nullptr;
  NcclResult (*broadcast)(const void*, void*, size_t, int, int, NcclComm, cudaStream_t) = nullptr;
  NcclResult (*reduce)(const void*, void*, size_t, int, int, int, NcclComm, cudaStream_t) = nullptr;
  NcclResult (*send)(const void*, size_t, int, int, NcclComm, cudaStream_t) = nullptr;
  NcclResult (*recv)(void*, size_t, int, int, NcclComm, cudaStream_t) = nullptr;
  NcclResult (*groupStart)() = nullptr;
  NcclResult (*groupEnd)() = nullptr;

  // "ncclAllReduce failed: <NCCL's name for the code>: <NCCL's last error>".
  Status check(NcclResult r, const char* call, NcclComm comm) const {
    if (r == 0) return Status::ok();
    std::string m = std::string(call) + " failed: " + (getErrorString ? getErrorString(r) : "?");
    const char* last = getLastError ? getLastError(comm) : nullptr;
    if (last != nullptr && *last != '\0') m += std::string(": ") + last;
    return internalError(m + " (NCCL result " + std::to_string(r) + ")");
  }
};

std::string ncclLibraryName() {
  const char* v = std::getenv("LANES_PERF_NCCL_LIB");
  return v != nullptr && *v != '\0' ? v : "libnccl.so.2";
}

namespace {

template <typename F>
Status resolve(NcclLibrary& lib, const char* symbol, F* out, bool required = true) {
  dlerror();
  void* p = dlsym(lib.handle.get(), symbol);
  if (p == nullptr && required) {
    const char* e = dlerror();
    return systemError(lib.name + " has no " + symbol + " (" + (e ? e : "not found") +
                       "); it is not an NCCL 2.x library, or too old (send/recv need 2.7).");
  }
  *out = reinterpret_cast<F>(p);
  return Status::ok();
}

class NcclBackend final : public CollBackend {
 public:
  NcclBackend(std::shared_ptr<const NcclLibrary> lib, NcclComm comm, int rank, int nranks)
      : lib_(std::move(lib)), comm_(comm) {
    rank_ = rank;
    nranks_ = nranks;
  }
  ~NcclBackend() override {
    if (comm_ != nullptr) lib_->commDestroy(comm_);
  }
  const char* name() const override { return "nccl"; }
  std::string describe() const override {
    return "NCCL " + ncclVersionString(*lib_) + " (" + lib_->name +
           (ncclIsLanesLayer(*lib_) ? ", Lanes' drop-in)" : ")");
  }
  Status allReduce(const void* s, void* r, size_t n, lanesDataType_t t, lanesRedOp_t op,
                   cudaStream_t st) override {
    return lib_->check(lib_->allReduce(s, r, n, t, op, comm_, st), "ncclAllReduce", comm_);
  }
  Status allGather(const void* s, void* r, size_t n, lanesDataType_t t, cudaStream_t st) override {
    return lib_->check(lib_->allGather(s, r, n, t, comm_, st), "ncclAllGather", comm_);
  }
  Status reduceScatter(const void* s, void* r, size_t n, lanesDataType_t t, lanesRedOp_t op,
                       cudaStream_t st) override {
    return lib_->check(lib_->reduceScatter(s, r, n, t, op, comm_, st), "ncclReduceScatter", comm_);
  }
  Status broadcast(const void* s, void* r, size_t n, lanesDataType_t t, int root,
                   cudaStream_t st) override {
    return lib_->check(lib_->broadcast(s, r, n, t, root, comm_, st), "ncclBroadcast", comm_);
  }
  Status reduce(const void* s, void* r, size_t n, lanesDataType_t t, lanesRedOp_t op, int root,
                cudaStream_t st) override {
    return lib_->check(lib_->reduce(s, r, n, t, op, root, comm_, st), "ncclReduce", comm_);
  }
  Status send(const void* s, size_t n, lanesDataType_t t, int peer, cudaStream_t st) override {
    return lib_->check(lib_->send(s, n, t, peer, comm_, st), "ncclSend", comm_);
  }
  Status recv(void* r, size_t n, lanesDataType_t t, int peer, cudaStream_t st) override {
    return lib_->check(lib_->recv(r, n, t, peer, comm_, st), "ncclRecv", comm_);
  }
  Status groupStart() override { return lib_->check(lib_->groupStart(), "ncclGroupStart", comm_); }
  Status groupEnd() override { return lib_->check(lib_->groupEnd(), "ncclGroupEnd", comm_); }
  void abort() override {
    if (comm_ != nullptr && lib_->commAbort != nullptr) lib_->commAbort(comm_);
    comm_ = nullptr;
  }

 private:
  std::shared_ptr<const NcclLibrary> lib_;
  NcclComm comm_;
};

}  // namespace

Status openNccl(std::shared_ptr<const NcclLibrary>* out) {
  auto lib = std::make_shared<NcclLibrary>();
  lib->name = ncclLibraryName();
  dlerror();
  lib->handle.reset(dlopen(lib->name.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (!lib->handle) {
    const char* e = dlerror();
    return systemError("could not load NCCL (" + lib->name + "): " + (e ? e : "dlopen failed") +
                       ". Install NCCL 2.x, put its lib directory on LD_LIBRARY_PATH, or set "
                       "LANES_PERF_NCCL_LIB to the library's path.");
  }
  LANES_RETURN_IF_ERROR(resolve(*lib, "ncclGetVersion", &lib->getVersion));
  LANES_RETURN_IF_ERROR(resolve(*lib, "ncclGetUniqueId", &lib->getUniqueId));
  LANES_RETURN_IF_ERROR(resolve(*lib, "ncclCommInitRank", &lib->commInitRank));
  LANES_RETURN_IF_ERROR(resolve(*lib, "ncclCommDestroy", &lib->commDestroy));
  LANES_RETURN_IF_ERROR(resolve(*lib, "ncclCommAbort", &lib->commAbort));
  LANES_RETURN_IF_ERROR(resolve(*lib, "ncclGetErrorString", &lib->getErrorString));
  LANES_RETURN_IF_ERROR(resolve(*lib, "ncclGetLastError", &lib->getLastError, false));
  LANES_RETURN_IF_ERROR(resolve(*lib, "ncclAllReduce", &lib->allReduce));
  LANES_RETURN_IF_ERROR(resolve(*lib, "ncclAllGather", &lib->allGather));
  LANES_RETURN_IF_ERROR(resolve(*lib, "ncclReduceScatter", &lib->reduceScatter));
  LANES_RETURN_IF_ERROR(resolve(*lib, "ncclBroadcast", &lib->broadcast));
  LANES_RETURN_IF_ERROR(resolve(*lib, "ncclReduce", &lib->reduce));
  LANES_RETURN_IF_ERROR(resolve(*lib, "ncclSend", &lib->send));
  LANES_RETURN_IF_ERROR(resolve(*lib, "ncclRecv", &lib->recv));
  LANES_RETURN_IF_ERROR(resolve(*lib, "ncclGroupStart", &lib->groupStart));
  LANES_RETURN_IF_ERROR(resolve(*lib, "ncclGroupEnd", &lib->groupEnd));
  *out = std::move(lib);
  return Status::ok();
}

std::string ncclVersionString(const NcclLibrary& lib) {
  int v = 0;
  if (lib.getVersion(&v) != 0) return "(version unknown)";
  // Since 2.9 the code is major*10000 + minor*100 + patch; before, *1000/*100.
  int major = v >= 10000 ? v / 10000 : v / 1000;
  int minor = v >= 10000 ? (v / 100) % 100 : (v / 100) % 10;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(v % 100);
}

bool ncclIsLanesLayer(const NcclLibrary& lib) {
  const char* internal = lib.getErrorString ? lib.getErrorString(3) : nullptr;  // ncclInternalError
  return internal != nullptr && std::strstr(internal, "Lanes") != nullptr;
}

Status ncclNewId(const NcclLibrary& lib, NcclId* out) {
  return lib.check(lib.getUniqueId(out), "ncclGetUniqueId", nullptr);
}

Status makeNcclBackend(std::shared_ptr<const NcclLibrary> lib, const NcclId& id, int rank,
                       int nranks, std::unique_ptr<CollBackend>* out) {
  NcclComm comm = nullptr;
  LANES_RETURN_IF_ERROR(
      lib->check(lib->commInitRank(&comm, nranks, id, rank), "ncclCommInitRank", nullptr));
  *out = std::make_unique<NcclBackend>(std::move(lib), comm, rank, nranks);
  return Status::ok();
}

}  // namespace lanes::perf
