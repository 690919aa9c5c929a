#include "perf/driver.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "core/host_id.h"
#include "perf/args.h"
#include "perf/copy_bounds.h"
#include "perf/element.h"
#include "perf/json_report.h"
#include "perf/memory.h"
#include "perf/pattern.h"
#include "perf/report.h"

namespace lanes::perf {
namespace {

bool launchedByLauncher() {
  auto has = [](const char* n) { return std::getenv(n) != nullptr; };
  return has("LANES_RANK") || (has("RANK") && has("WORLD_SIZE")) || has("OMPI_COMM_WORLD_RANK") ||
         (has("SLURM_PROCID") && has("SLURM_STEP_ID"));
}

struct Result {
  double timeUs = 0, algBw = 0, busBw = 0;
  int64_t wrong = -1;
};

// What every rank of the run shares: resolved memory, GPUs, printed notes.
struct RunSetup {
  Memory memory = Memory::Host;
  int nThreads = 1, nGpus = 1;  // as the header prints them
  bool bounds = false;
  std::string note;  // printed by rank 0 under "Using devices" (may be empty)
};

// Everything one rank does; rank 0 also prints.
class RankRun {
 public:
  RankRun(const PerfArgs& args, const CollSpec& spec, lanesComm_t comm, const char* prog,
          const RunSetup& setup)
      : a_(args), spec_(spec), comm_(comm), prog_(prog), setup_(setup) {
    lanesCommUserRank(comm, &rank_);
    lanesCommCount(comm, &nranks_);
    graph_ = setup.memory == Memory::Device ? args.graphLaunches : 0;
  }

  // 0 when every value was right, 1 otherwise (same answer on every rank).
  int run();

 private:
  void ok(lanesResult_t r, const char* call) const;
  void ok(const Status& s, const char* what) const;
  void barrier();
  double reduceTime(double seconds);
  int64_t sumAll(int64_t v);
  template <typename T>
  std::vector<T> gather(const T* mine, size_t perRank, lanesDataType_t type);
  void measureBounds();
  void printHeader();
  void allocateBuffers();
  CollCounts countsFor(uint64_t bytes, lanesDataType_t t) const {
    return spec_.counts(bytes / elementSize(t), nranks_);
  }
  lanesResult_t tryLaunch(const CollCounts& c, lanesDataType_t t, lanesRedOp_t op, bool inPlace);
  void launch(const CollCounts& c, lanesDataType_t t, lanesRedOp_t op, bool inPlace) {
    ok(tryLaunch(c, t, op, inPlace), spec_.name);
  }
  void fill(const CollCounts& c, const DataKey& key, bool inPlace);
  int64_t countWrong(const CollCounts& c, const DataKey& key, bool inPlace) const;
  double timeLoop(const CollCounts& c, lanesDataType_t t, lanesRedOp_t op, bool inPlace);
  bool timeGraph(const CollCounts& c, lanesDataType_t t, lanesRedOp_t op, bool inPlace,
                 double* seconds);
  Result bench(uint64_t bytes, lanesDataType_t t, lanesRedOp_t op, bool inPlace);
  void sweep(lanesDataType_t t, lanesRedOp_t op);
  bool printer() const { return rank_ == 0; }

  const PerfArgs& a_;
  const CollSpec& spec_;
  lanesComm_t comm_;
  const char* prog_;
  const RunSetup& setup_;
  int rank_ = 0, nranks_ = 1;
  int gpu_ = -1;
  int graph_ = 0;  // CUDA Graph launches per size; 0 once capture was refused
  std::unique_ptr<RankMemory> mem_;
  std::vector<uint8_t> control_ = std::vector<uint8_t>(64);  // host memory, for barriers
  std::vector<std::string> boundLines_;                      // rank 0: header lines
  uint64_t rep_ = 0;
  double bwSum_ = 0;
  int bwCount_ = 0;
  int errors_ = 0;
  JsonReport json_;
};

void RankRun::ok(lanesResult_t r, const char* call) const {
  if (r == lanesSuccess) return;
  std::fflush(stdout);
  std::fprintf(stderr, "%s: rank %d: %s failed: %s: %s\n", prog_, rank_, call,
               lanesGetErrorString(r), lanesGetLastError(comm_));
  std::fflush(stderr);
  lanesCommAbort(comm_);
  std::_Exit(1);  // the other ranks learn of it from Lanes (or lanes-run)
}

void RankRun::ok(const Status& s, const char* what) const {
  if (s) return;
  std::fflush(stdout);
  std::fprintf(stderr, "%s: rank %d (GPU %d): %s: %s\n", prog_, rank_, gpu_, what,
               s.message().c_str());
  std::fflush(stderr);
  lanesCommAbort(comm_);
  std::_Exit(1);
}

void RankRun::barrier() {
  auto* v = reinterpret_cast<int32_t*>(control_.data());
  v[0] = 1;
  ok(lanesAllReduce(v, v + 1, 1, lanesInt32, lanesSum, comm_, nullptr), "lanesAllReduce (barrier)");
}

double RankRun::reduceTime(double seconds) {
  auto* v = reinterpret_cast<double*>(control_.data());
  lanesRedOp_t op = lanesSum;
  v[0] = seconds;
  switch (a_.average) {
    case 0:
      v[0] = rank_ == 0 ? seconds : 0.0;
      break;
    case 2:
      op = lanesMin;
      break;
    case 3:
      op = lanesMax;
      break;
    default:
      break;
  }
  ok(lanesAllReduce(v, v + 1, 1, lanesFloat64, op, comm_, nullptr), "lanesAllReduce (timing)");
  return a_.average == 1 ? v[1] / nranks_ : v[1];
}

int64_t RankRun::sumAll(int64_t value) {
  auto* v = reinterpret_cast<int64_t*>(control_.data());
  v[0] = value;
  ok(lanesAllReduce(v, v + 1, 1, lanesInt64, lanesSum, comm_, nullptr), "lanesAllReduce (check)");
  return v[1];
}

// Every rank's `perRank` values, in rank order, on every rank: each puts its
// own in its slot and zeros elsewhere, so a sum all-reduce (host memory) is
// an all-gather that needs no other collective.
template <typename T>
std::vector<T> RankRun::gather(const T* mine, size_t perRank, lanesDataType_t type) {
  std::vector<T> all(perRank * nranks_ * 2, T{});
  std::copy(mine, mine + perRank, all.begin() + perRank * rank_);
  ok(lanesAllReduce(all.data(), all.data() + perRank * nranks_, perRank * nranks_, type, lanesSum,
                    comm_, nullptr),
     "lanesAllReduce (gather)");
  all.erase(all.begin(), all.begin() + perRank * nranks_);
  return all;
}

// The lowest rank on each (host, GPU) measures that GPU; all GPUs at once,
// as a collective loads them. Runs before any collective on device buffers,
// so the allocations it makes and frees cannot wait on a peer's stream.
void RankRun::measureBounds() {
  uint64_t where[2] = {hostHash(), static_cast<uint64_t>(gpu_ + 1)};
  std::vector<uint64_t> places = gather(where, 2, lanesUint64);
  bool first = true;
  for (int r = 0; r < rank_; ++r) {
    if (places[2 * r] == where[0] && places[2 * r + 1] == where[1]) first = false;
  }
  constexpr size_t kLine = 256;
  char line[kLine] = {};
  double values[6] = {};
  if (first) {
    CopyBounds b;
    ok(measureCopyBounds(kBoundBytes, &b), "measuring copy bandwidth (--bounds)");
    std::snprintf(line, sizeof(line), "#  %-12s GPU %2d  %8.2f  %8.2f  %10.2f  %10.2f  %10.2f\n",
                  hostName().c_str(), gpu_, b.h2d, b.d2h, b.bothH2d, b.bothD2h, b.d2dCopy);
    values[0] = 1;
    values[1] = b.h2d;
    values[2] = b.d2h;
    values[3] = b.bothH2d;
    values[4] = b.bothD2h;
    values[5] = b.d2dCopy;
  }
  std::vector<uint8_t> text = gather(reinterpret_cast<const uint8_t*>(line), kLine, lanesUint8);
  std::vector<double> numbers = gather(values, 6, lanesFloat64);
  if (!printer()) return;
  for (int r = 0; r < nranks_; ++r) {
    const double* v = numbers.data() + 6 * r;
    if (v[0] == 0) continue;
    const char* l = reinterpret_cast<const char*>(text.data() + kLine * r);
    boundLines_.emplace_back(l, strnlen(l, kLine));
    // The host name and GPU are in the text line; JSON takes them from there too.
    char host[kLine] = {};
    int gpu = -1;
    std::sscanf(l, "# %255s GPU %d", host, &gpu);
    json_.addBound({host, gpu, kBoundBytes, {v[1], v[2], v[3], v[4], v[5]}});
  }
}

void RankRun::printHeader() {
  constexpr size_t kLine = 256;
  char line[kLine] = {};
  const std::string label = gpu_ >= 0 ? gpuLabel(gpu_) : "[host] host memory";
  std::snprintf(line, sizeof(line), "#  Rank %2d Group %2d Pid %6d on %10s device %2d %s\n", rank_,
                0, static_cast<int>(getpid()), hostName().c_str(), gpu_, label.c_str());
  std::vector<uint8_t> lines = gather(reinterpret_cast<const uint8_t*>(line), kLine, lanesUint8);
  if (!printer()) return;
  std::printf("# Collective test starting: %s\n", prog_);
  std::printf(
      "# nThread %d nGpus %d minBytes %llu maxBytes %llu step: %llu(%s) warmup iters: %d "
      "iters: %d agg iters: %d validation: %d graph: %d\n",
      setup_.nThreads, setup_.nGpus, static_cast<unsigned long long>(a_.minBytes),
      static_cast<unsigned long long>(a_.maxBytes),
      static_cast<unsigned long long>(a_.stepFactor > 1 ? a_.stepFactor : a_.stepBytes),
      a_.stepFactor > 1 ? "factor" : "bytes", a_.warmupIters, a_.iters, a_.aggIters, a_.check,
      graph_);
  if (a_.blocking)
    std::printf("# Blocking Enabled: wait for completion and barrier after each collective \n");
  std::printf("#\n# Using devices\n");
  for (int r = 0; r < nranks_; ++r) {
    const char* l = reinterpret_cast<const char*>(lines.data() + kLine * r);
    std::printf("%.*s", static_cast<int>(kLine), l);
    int rank = -1, pid = 0, gpu = -1;
    char host[kLine] = {}, bus[kLine] = {};
    std::sscanf(l, "# Rank %d Group %*d Pid %d on %255s device %d %255[^\n]", &rank, &pid, host,
                &gpu, bus);
    json_.addPlace({r, host, gpu, bus});
  }
  std::printf("# Memory: %s\n", setup_.memory == Memory::Device
                                    ? "device (cudaMalloc; one non-blocking stream per rank)"
                                    : "host");
  if (!setup_.note.empty()) std::printf("%s", setup_.note.c_str());
  if (!boundLines_.empty()) {
    std::printf(
        "#\n# Bounds measured in this run: cudaMemcpyAsync of %zu MiB, pinned host <-> device, "
        "all GPUs at once; GB/s = 1e9 B/s\n",
        kBoundBytes >> 20);
    std::printf("#  %-12s %6s  %8s  %8s  %10s  %10s  %10s\n", "host", "GPU", "H2D", "D2H",
                "both: H2D", "both: D2H", "D2D copy");
    for (const std::string& l : boundLines_) std::printf("%s", l.c_str());
    std::printf(
        "#  (both: each direction while the other runs; D2D copy: bytes copied/s, the memory "
        "reads+writes are 2x)\n");
  }
  std::printf("#\n%s", columnHeader().c_str());
  std::fflush(stdout);
}

void RankRun::allocateBuffers() {
  size_t sendBytes = 0, recvBytes = 0;
  for (lanesDataType_t t : a_.types) {
    CollCounts c = countsFor(a_.maxBytes, t);
    sendBytes = std::max(sendBytes, c.sendCount * elementSize(t));
    recvBytes = std::max(recvBytes, c.recvCount * elementSize(t));
  }
  if (setup_.memory == Memory::Device) {
    ok(makeDeviceMemory(sendBytes, recvBytes, &mem_), "allocating device buffers");
  } else {
    ok(makeHostMemory(sendBytes, recvBytes, &mem_), "allocating host buffers");
  }
}

lanesResult_t RankRun::tryLaunch(const CollCounts& c, lanesDataType_t t, lanesRedOp_t op,
                                 bool inPlace) {
  const size_t ts = elementSize(t);
  uint8_t* recv = mem_->recv();
  const uint8_t* send =
      inPlace ? recv + c.sendInplaceOffset * ts * static_cast<size_t>(rank_) : mem_->send();
  if (inPlace) recv += c.recvInplaceOffset * ts * static_cast<size_t>(rank_);
  return spec_.run(send, recv, c.paramCount, t, op, a_.root, comm_, mem_->stream());
}

// Inputs are written on the host (the mirrors) and, on device memory, copied
// up; the receive buffer is cleared so a result left by the last size cannot
// pass the check.
void RankRun::fill(const CollCounts& c, const DataKey& key, bool inPlace) {
  const size_t ts = elementSize(key.type);
  std::memset(mem_->hostRecv(), 0, c.recvCount * ts);
  uint8_t* send = inPlace ? mem_->hostRecv() + c.sendInplaceOffset * ts * static_cast<size_t>(rank_)
                          : mem_->hostSend();
  for (size_t i = 0; i < c.sendCount; ++i) storeElement(key.type, send, i, spec_.input(key, i));
  ok(mem_->upload(inPlace ? 0 : c.sendCount * ts, c.recvCount * ts), "copying inputs to the GPU");
}

int64_t RankRun::countWrong(const CollCounts& c, const DataKey& key, bool inPlace) const {
  const size_t ts = elementSize(key.type);
  ok(mem_->download(c.recvCount * ts), "copying results from the GPU");
  const uint8_t* recv = mem_->hostRecv();
  if (inPlace) recv += c.recvInplaceOffset * ts * static_cast<size_t>(rank_);
  int64_t wrong = 0;
  for (size_t i = 0; i < c.recvCount; ++i) {
    auto e = spec_.expect(key, i);
    if (e && !matches(loadElement(key.type, recv, i), e->value, e->tolerance)) ++wrong;
  }
  return wrong;
}

// As nccl-tests: iters x agg collectives back to back, then wait for the
// stream; wall clock around both, per collective.
double RankRun::timeLoop(const CollCounts& c, lanesDataType_t t, lanesRedOp_t op, bool inPlace) {
  const int total = a_.iters * a_.aggIters;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < total; ++i) {
    launch(c, t, op, inPlace);
    if (a_.blocking) ok(mem_->wait(), "waiting for the stream");
  }
  ok(mem_->wait(), "waiting for the stream");
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / total;
}

// -G: capture the loop into a graph and time graph_ launches of it. False
// (on every rank alike) when any rank's library call refused the capture;
// then graph mode is off for the rest of the run, said once.
bool RankRun::timeGraph(const CollCounts& c, lanesDataType_t t, lanesRedOp_t op, bool inPlace,
                        double* seconds) {
  const int total = a_.iters * a_.aggIters;
  ok(mem_->beginCapture(), "cudaStreamBeginCapture");
  lanesResult_t r = lanesSuccess;
  for (int i = 0; i < total && r == lanesSuccess; ++i) r = tryLaunch(c, t, op, inPlace);
  const std::string why = r == lanesSuccess ? "" : lanesGetLastError(comm_);
  Status ended = mem_->endCapture(r == lanesSuccess);
  const bool refused = r != lanesSuccess || !ended;
  if (sumAll(refused ? 1 : 0) > 0) {  // also the barrier before timing
    if (printer()) {
      std::printf("# -G %d: CUDA Graph capture of %s on device buffers was refused: %s\n", graph_,
                  spec_.name,
                  refused ? (why.empty() ? ended.message().c_str() : why.c_str())
                          : "(refused on another rank)");
      std::printf(
          "# -G: timing without graphs from here on (the graph column stays 0 in "
          "the header of later runs).\n");
      std::fflush(stdout);
    }
    graph_ = 0;
    return false;
  }
  auto t0 = std::chrono::steady_clock::now();
  for (int l = 0; l < graph_; ++l) ok(mem_->launchGraph(), "cudaGraphLaunch");
  ok(mem_->wait(), "waiting for the stream");
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
             (static_cast<double>(total) * graph_);
  return true;
}

Result RankRun::bench(uint64_t bytes, lanesDataType_t t, lanesRedOp_t op, bool inPlace) {
  const CollCounts c = countsFor(bytes, t);
  DataKey key{t, op, rank_, nranks_, a_.root, c.paramCount, 99};
  if (a_.check) fill(c, key, inPlace);  // time on valid numbers, as nccl-tests does
  launch(c, t, op, inPlace);
  ok(mem_->wait(), "waiting for the stream");

  barrier();
  double seconds = 0;
  // timeGraph lines the ranks up again (its capture verdict is an all-reduce).
  if (graph_ == 0 || !timeGraph(c, t, op, inPlace, &seconds)) seconds = timeLoop(c, t, op, inPlace);
  seconds = reduceTime(seconds);

  Result res;
  res.timeUs = seconds * 1e6;
  res.algBw = spec_.algBytes(c.paramCount, elementSize(t), nranks_) / 1e9 / seconds;
  res.busBw = res.algBw * spec_.busFactor(nranks_);
  if (a_.check) {
    res.wrong = 0;
    for (int k = 0; k < a_.check && res.wrong == 0; ++k) {
      key.seed = ++rep_;
      fill(c, key, inPlace);
      launch(c, t, op, inPlace);
      res.wrong = sumAll(countWrong(c, key, inPlace));
    }
    if (res.wrong != 0) ++errors_;
  }
  bwSum_ += res.busBw;
  ++bwCount_;
  return res;
}

void RankRun::sweep(lanesDataType_t t, lanesRedOp_t op) {
  barrier();
  for (uint64_t bytes : {a_.maxBytes, a_.minBytes}) {
    const CollCounts c = countsFor(bytes, t);
    for (int i = 0; i < a_.warmupIters; ++i) launch(c, t, op, false);
  }
  ok(mem_->wait(), "waiting for the stream");
  const char* typeName = perfTypeName(t);
  const char* opName = spec_.reduces ? perfOpName(op) : "none";
  const int root = spec_.rooted ? a_.root : -1;
  for (uint64_t bytes : sweepSizes(a_)) {
    const CollCounts c = countsFor(bytes, t);
    const size_t ts = elementSize(t);
    const uint64_t shown = std::max(c.sendCount, c.recvCount) * ts;
    Result outOfPlace = bench(bytes, t, op, false);
    Result inPlace;
    if (spec_.inPlace) inPlace = bench(bytes, t, op, true);
    if (!printer()) continue;
    std::printf(
        "%s%s%s\n", rowParams(shown, c.paramCount, typeName, opName, root).c_str(),
        rowResult(outOfPlace.timeUs, outOfPlace.algBw, outOfPlace.busBw, outOfPlace.wrong).c_str(),
        (spec_.inPlace ? rowResult(inPlace.timeUs, inPlace.algBw, inPlace.busBw, inPlace.wrong)
                       : rowSkipped())
            .c_str());
    std::fflush(stdout);
    json_.addRow({shown, c.paramCount, typeName, opName, root},
                 {outOfPlace.timeUs, outOfPlace.algBw, outOfPlace.busBw, outOfPlace.wrong},
                 {inPlace.timeUs, inPlace.algBw, inPlace.busBw, inPlace.wrong});
  }
}

int RankRun::run() {
  if (spec_.rooted && a_.root >= nranks_) {
    if (printer()) {
      std::fprintf(stderr, "%s: -r %d is not a rank of this %d-rank run.\n", prog_, a_.root,
                   nranks_);
    }
    return 2;
  }
  if (setup_.memory == Memory::Device) {
    // The communicator's GPU, made current in this rank's own thread.
    lanesCommCuDevice(comm_, &gpu_);
    ok(selectGpu(gpu_), "selecting the rank's GPU");
  }
  allocateBuffers();
  if (setup_.bounds) measureBounds();
  printHeader();
  for (int cycle = 0; a_.runCycles == 0 || cycle < a_.runCycles; ++cycle) {
    for (lanesDataType_t t : a_.types) {
      if (spec_.reduces) {
        for (lanesRedOp_t op : a_.ops) sweep(t, op);
      } else {
        sweep(t, lanesSum);
      }
    }
  }
  if (printer()) {
    double avg = bwCount_ ? bwSum_ / bwCount_ : 0.0;
    std::printf("# Out of bounds values : %d %s\n", errors_, errors_ ? "FAILED" : "OK");
    std::printf("# Avg bus bandwidth    : %g \n#\n", avg);
    std::fflush(stdout);
    if (!a_.jsonPath.empty()) {
      json_.setMemory(setup_.memory == Memory::Device ? "device" : "host", graph_);
      std::string err;
      if (!json_.write(a_.jsonPath, spec_.name, nranks_, avg, errors_, &err)) {
        std::fprintf(stderr, "%s: %s\n", prog_, err.c_str());
      }
    }
  }
  // Every rank's device work is finished before any rank frees its buffers
  // (cudaFree waits for the whole GPU, a peer's parked stream included).
  ok(mem_->wait(), "waiting for the stream");
  barrier();
  return errors_ ? 1 : 0;
}

std::string baseName(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

// The local rank a launcher gives this process (its GPU is local rank % GPUs).
int localRankFromEnv() {
  LaunchEnv env;
  if (!readLaunchEnv(&env)) return 0;
  return env.localRank >= 0 ? env.localRank : std::max(env.rank, 0);
}

}  // namespace

int perfMain(int argc, char** argv, const CollSpec& spec) {
  // Before any CUDA call: several ranks' streams on one GPU need more
  // hardware queues than CUDA's default 8 (docs/gpu_data_path.md).
  requestDeviceConnections();
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string prog = baseName(argv[0]);
  PerfArgs args;
  ParseResult parsed = parsePerfArgs(std::vector<std::string>(argv + 1, argv + argc), &args);
  if (!parsed.ok) {
    std::fprintf(stderr, "%s: %s\n", prog.c_str(), parsed.error.c_str());
    return 2;
  }
  if (args.help) {
    std::printf("USAGE: %s [options]\n%s", prog.c_str(), perfUsage());
    return 0;
  }

  RunSetup setup;
  const bool cudaBuilt = deviceMemoryBuilt();
  const int gpus = cudaBuilt && args.memory != Memory::Host ? visibleGpus() : 0;
  setup.memory = resolveMemory(args.memory, cudaBuilt, gpus);
  if (setup.memory == Memory::Device && !cudaBuilt) {
    std::fprintf(stderr,
                 "%s: --memory device needs the CUDA data path, which this build does not have "
                 "(nvcc was not found or LANES_ENABLE_CUDA=OFF); use --memory host.\n",
                 prog.c_str());
    return 2;
  }
  if (setup.memory == Memory::Device && gpus == 0) {
    std::fprintf(stderr,
                 "%s: --memory device, but this process sees no CUDA device (check "
                 "CUDA_VISIBLE_DEVICES and the driver); use --memory host.\n",
                 prog.c_str());
    return 2;
  }
  const bool device = setup.memory == Memory::Device;
  setup.bounds = device && args.bounds != 0;
  if (!device && args.bounds == 1) {
    setup.note += "# --bounds: copy bandwidth is measured on device memory only; skipped.\n";
  }
  if (!device && args.graphLaunches > 0) {
    setup.note += "# -G: CUDA Graphs need --memory device; timing without graphs.\n";
  }

  if (launchedByLauncher()) {
    if (args.nThreads * args.nGpus != 1) {
      std::fprintf(stderr,
                   "%s: -t/-g ranks per process are not supported under a launcher; start one "
                   "rank per process (lanes-run -n N) or run without a launcher.\n",
                   prog.c_str());
      return 2;
    }
    if (device) {
      // The communicator takes the thread's current GPU at init.
      const int gpu = gpuForRank(localRankFromEnv(), gpus);
      Status st = selectGpu(gpu);
      if (!st) {
        std::fprintf(stderr, "%s: %s\n", prog.c_str(), st.message().c_str());
        return 1;
      }
    }
    lanesComm_t comm = nullptr;
    lanesResult_t r = lanesCommInitFromEnv(&comm, nullptr);
    if (r != lanesSuccess) {
      std::fprintf(stderr, "%s: lanesCommInitFromEnv failed: %s: %s\n", prog.c_str(),
                   lanesGetErrorString(r), lanesGetLastError(nullptr));
      return 1;
    }
    const int rc = RankRun(args, spec, comm, prog.c_str(), setup).run();
    lanesCommDestroy(comm);
    return rc;
  }

  // No launcher: nccl-tests' -t threads x -g GPUs per thread, one thread per
  // rank here. On device memory rank r uses GPU r % (visible GPUs), so more
  // ranks than GPUs share them.
  const int n = args.nThreads * args.nGpus;
  setup.nThreads = args.nThreads;
  setup.nGpus = args.nGpus;
  std::vector<int> devlist;
  if (device) {
    for (int r = 0; r < n; ++r) devlist.push_back(gpuForRank(r, gpus));
    if (n > gpus) {
      setup.note += "# Note: " + std::to_string(n) + " ranks on " + std::to_string(gpus) +
                    " visible GPU(s): rank r uses GPU r % " + std::to_string(gpus) +
                    "; ranks sharing a GPU share its PCIe link (NCCL refuses this; Lanes "
                    "allows it).\n";
    }
  }
  std::vector<lanesComm_t> comms(n, nullptr);
  lanesResult_t r = lanesCommInitAll(comms.data(), n, device ? devlist.data() : nullptr);
  if (r != lanesSuccess) {
    std::fprintf(stderr, "%s: lanesCommInitAll(%d) failed: %s: %s\n", prog.c_str(), n,
                 lanesGetErrorString(r), lanesGetLastError(nullptr));
    return 1;
  }
  std::vector<int> rcs(n, 0);
  {
    std::vector<std::jthread> threads;
    for (int i = 1; i < n; ++i) {
      threads.emplace_back(
          [&, i] { rcs[i] = RankRun(args, spec, comms[i], prog.c_str(), setup).run(); });
    }
    rcs[0] = RankRun(args, spec, comms[0], prog.c_str(), setup).run();
  }
  for (lanesComm_t c : comms) lanesCommDestroy(c);
  return *std::max_element(rcs.begin(), rcs.end());
}

}  // namespace lanes::perf
