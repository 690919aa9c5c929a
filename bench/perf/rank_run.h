// One rank of a perf run: buffers, backends, the sweep, and on rank 0 the
// table, the footer and the JSON. perfMain (driver.cc) creates the ranks.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lanes/lanes.h"
#include "perf/args.h"
#include "perf/backend.h"
#include "perf/coll.h"
#include "perf/copy_bounds.h"
#include "perf/json_report.h"
#include "perf/memory.h"

namespace lanes::perf {

// Bytes per rank of a text line gathered from every rank.
inline constexpr size_t kLine = 256;

// What every rank of the run shares.
struct RunSetup {
  Memory memory = Memory::Host;
  int nThreads = 1, nGpus = 1;  // as the header prints them
  bool threadRanks = false;     // ranks are threads of this process
  bool bounds = false;
  bool corrupt = false;  // LANES_PERF_CORRUPT=1: the test hook (docs/env.md)
  std::string tool, command;
  std::string note;  // printed by rank 0 under "Using devices" (may be empty)
};

class RankRun {
 public:
  RankRun(const PerfArgs& args, const CollSpec& spec, lanesComm_t comm, const RunSetup& setup);
  // 0 when every value was right, 1 otherwise or on a failed call, 2 for a
  // run that cannot start (same answer on every rank).
  int run();

 private:
  struct Result {
    double timeUs = 0, cpuUs = 0, algBw = 0, busBw = 0;
    int64_t wrong = -1;
    // Where the call ran, as the library recorded it (core/plan_record.h); "" for NCCL.
    std::string plan;
  };
  struct Place {
    uint64_t hostHash = 0;
    std::string host;
    int gpu = -1;
    int pid = 0;
    std::string label;
  };
  using Where = std::pair<uint64_t, int>;  // (host hash, GPU or -1)

  void ok(const Status& s, const char* what) const;
  void okLanes(lanesResult_t r, const char* what) const;
  void barrier();
  double reduceTime(double seconds);
  int64_t sumAll(int64_t v);
  template <typename T>
  std::vector<T> gather(const T* mine, size_t perRank, lanesDataType_t type);
  void gatherPlaces();
  void measureBounds();
  int setupBackends();
  void printHeader();
  void allocateBuffers();
  CollCounts countsFor(uint64_t bytes, lanesDataType_t t) const;
  size_t recvExtent(const CollCounts& c, bool inPlace) const;
  Status tryLaunch(CollBackend& b, const CollCounts& c, lanesDataType_t t, lanesRedOp_t op,
                   bool inPlace);
  void fill(const CollCounts& c, const DataKey& key, bool inPlace);
  int64_t countWrong(const CollCounts& c, const DataKey& key, bool inPlace);
  void timeLoop(CollBackend& b, const CollCounts& c, lanesDataType_t t, lanesRedOp_t op,
                bool inPlace, double* seconds, double* cpuSeconds);
  bool timeGraph(CollBackend& b, const CollCounts& c, lanesDataType_t t, lanesRedOp_t op,
                 bool inPlace, double* seconds, double* cpuSeconds);
  Result bench(CollBackend& b, uint64_t bytes, lanesDataType_t t, lanesRedOp_t op, bool inPlace);
  std::optional<double> boundFor(const CollCounts& c, size_t typeSize) const;
  void sweep(lanesDataType_t t, lanesRedOp_t op);
  void footer();
  void saveJson(bool complete);
  bool printer() const { return rank_ == 0; }
  bool comparing() const { return backends_.size() > 1; }

  const PerfArgs& a_;
  const CollSpec& spec_;
  lanesComm_t comm_;  // the driver's own traffic, and the Lanes backend
  const RunSetup& setup_;
  int rank_ = 0, nranks_ = 1;
  int gpu_ = -1;
  int graph_ = 0;  // CUDA Graph launches per size; 0 once capture was refused
  std::unique_ptr<RankMemory> mem_;
  std::vector<uint8_t> control_ = std::vector<uint8_t>(256);  // host memory, for control calls
  std::vector<std::unique_ptr<CollBackend>> backends_;        // row order per size
  std::vector<Place> places_;                                 // every rank's, on every rank
  std::map<Where, CopyBounds> gpuRates_;                      // --bounds, device memory
  std::map<Where, double> hostRates_;                         // --bounds, host memory (GB/s)
  std::vector<std::string> headerNotes_;                      // rank 0
  bool corruptPending_ = false;
  std::vector<double> bwSum_;
  std::vector<int> bwCount_;
  int errors_ = 0;
  JsonReport json_;
  std::string jsonError_;  // the last -J failure printed
};

}  // namespace lanes::perf
