// Lanes and NCCL behind lanes_overlap::Collective, over bench/perf's
// CollBackend (perf/backend.h, perf/backend_nccl.h): the same dlopen shim and
// error sentences as the perf tools' --backend nccl.
#include "gpu/overlap_collective.h"

#include <cstdlib>
#include <utility>

#include "perf/backend.h"
#include "perf/backend_nccl.h"

namespace lanes_overlap {
namespace {

using lanes::perf::CollBackend;

class BackendRank final : public RankComm {
 public:
  explicit BackendRank(std::unique_ptr<CollBackend> backend) : backend_(std::move(backend)) {}
  std::string allReduceSum(const void* send, void* recv, size_t count,
                           cudaStream_t stream) override {
    lanes::Status s = backend_->allReduce(send, recv, count, lanesFloat32, lanesSum, stream);
    return s ? std::string() : s.message();
  }

 private:
  std::unique_ptr<CollBackend> backend_;
};

// Lanes thread ranks from lanesCommInitAll; the communicators stay owned here
// (the backend borrows them) and are destroyed by stop().
class LanesCollective final : public Collective {
 public:
  explicit LanesCollective(std::vector<int> devices) : devices_(std::move(devices)) {}
  ~LanesCollective() override { stop(); }
  const char* name() const override { return "lanes"; }
  std::string describe() const override {
    int v = 0;
    lanesGetVersion(&v);
    return "Lanes " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
           std::to_string(v % 100) + " (this build)";
  }
  std::string start() override {
    comms_.assign(devices_.size(), nullptr);
    if (lanesCommInitAll(comms_.data(), static_cast<int>(devices_.size()), devices_.data()) !=
        lanesSuccess) {
      comms_.clear();
      return std::string("lanesCommInitAll failed: ") + lanesGetLastError(nullptr);
    }
    return {};
  }
  std::string initRank(int rank, std::unique_ptr<RankComm>* out) override {
    *out = std::make_unique<BackendRank>(lanes::perf::makeLanesBackend(comms_.at(rank)));
    return {};
  }
  void stop() override {
    for (lanesComm_t c : comms_) lanesCommDestroy(c);
    comms_.clear();
  }

 private:
  std::vector<int> devices_;
  std::vector<lanesComm_t> comms_;
};

// NCCL: one id from the main thread, then ncclCommInitRank on every rank's
// thread at once (it blocks until all ranks joined). Each RankComm owns its
// ncclComm and destroys it on its own thread.
class NcclCollective final : public Collective {
 public:
  NcclCollective(std::shared_ptr<const lanes::perf::NcclLibrary> lib, int nranks)
      : lib_(std::move(lib)), nranks_(nranks) {}
  const char* name() const override { return "nccl"; }
  std::string describe() const override {
    return "NCCL " + lanes::perf::ncclVersionString(*lib_) + " (" + lanes::perf::ncclLibraryName() +
           ")";
  }
  std::string start() override {
    lanes::Status s = lanes::perf::ncclNewId(*lib_, &id_);
    return s ? std::string() : s.message();
  }
  std::string initRank(int rank, std::unique_ptr<RankComm>* out) override {
    std::unique_ptr<CollBackend> backend;
    lanes::Status s = lanes::perf::makeNcclBackend(lib_, id_, rank, nranks_, &backend);
    if (!s) return "rank " + std::to_string(rank) + ": " + s.message();
    *out = std::make_unique<BackendRank>(std::move(backend));
    return {};
  }
  void stop() override {}

 private:
  std::shared_ptr<const lanes::perf::NcclLibrary> lib_;
  int nranks_;
  lanes::perf::NcclId id_;
};

}  // namespace

std::string openCollective(const std::string& backend, const std::vector<int>& devices,
                           std::unique_ptr<Collective>* out) {
  if (backend == "lanes") {
    *out = std::make_unique<LanesCollective>(devices);
    return {};
  }
  if (backend != "nccl") return "unknown backend '" + backend + "' (lanes or nccl)";
  // The machines this runs on keep NVLink multicast off; a value the user set wins.
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  std::shared_ptr<const lanes::perf::NcclLibrary> lib;
  lanes::Status s = lanes::perf::openNccl(&lib);
  if (!s) return s.message();
  *out = std::make_unique<NcclCollective>(std::move(lib), static_cast<int>(devices.size()));
  return {};
}

}  // namespace lanes_overlap
