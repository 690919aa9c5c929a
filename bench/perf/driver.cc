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

#include "perf/args.h"
#include "perf/element.h"
#include "perf/json_report.h"
#include "perf/pattern.h"
#include "perf/report.h"

namespace lanes::perf {
namespace {

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<uint8_t, FreeDeleter>;

// Page-aligned and zeroed (touched), so first-use page faults stay out of timing.
Buffer allocate(size_t bytes) {
  size_t rounded = std::max<size_t>(4096, (bytes + 4095) / 4096 * 4096);
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(4096, rounded));
  if (p == nullptr) {
    std::fprintf(stderr, "perf: could not allocate %zu bytes of host memory; lower -e.\n", bytes);
    std::exit(1);
  }
  std::memset(p, 0, rounded);
  return Buffer(p);
}

bool launchedByLauncher() {
  auto has = [](const char* n) { return std::getenv(n) != nullptr; };
  return has("LANES_RANK") || (has("RANK") && has("WORLD_SIZE")) || has("OMPI_COMM_WORLD_RANK") ||
         (has("SLURM_PROCID") && has("SLURM_STEP_ID"));
}

std::string hostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

struct Result {
  double timeUs = 0, algBw = 0, busBw = 0;
  int64_t wrong = -1;
};

// Everything one rank does; rank 0 also prints.
class RankRun {
 public:
  RankRun(const PerfArgs& args, const CollSpec& spec, lanesComm_t comm, const char* prog,
          int nThreads, int nGpus)
      : a_(args), spec_(spec), comm_(comm), prog_(prog), nThreads_(nThreads), nGpus_(nGpus) {
    lanesCommUserRank(comm, &rank_);
    lanesCommCount(comm, &nranks_);
  }

  // 0 when every value was right, 1 otherwise (same answer on every rank).
  int run();

 private:
  void ok(lanesResult_t r, const char* call) const;
  void barrier();
  double reduceTime(double seconds);
  int64_t sumAll(int64_t v);
  void printHeader();
  void allocateBuffers();
  CollCounts countsFor(uint64_t bytes, lanesDataType_t t) const {
    return spec_.counts(bytes / elementSize(t), nranks_);
  }
  void launch(const CollCounts& c, lanesDataType_t t, lanesRedOp_t op, bool inPlace);
  void fill(const CollCounts& c, const DataKey& key, bool inPlace);
  int64_t countWrong(const CollCounts& c, const DataKey& key, bool inPlace) const;
  Result bench(uint64_t bytes, lanesDataType_t t, lanesRedOp_t op, bool inPlace);
  void sweep(lanesDataType_t t, lanesRedOp_t op);
  bool printer() const { return rank_ == 0; }

  const PerfArgs& a_;
  const CollSpec& spec_;
  lanesComm_t comm_;
  const char* prog_;
  int nThreads_, nGpus_;
  int rank_ = 0, nranks_ = 1;
  Buffer send_, recv_, control_;
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

void RankRun::barrier() {
  auto* v = reinterpret_cast<int32_t*>(control_.get());
  v[0] = 1;
  ok(lanesAllReduce(v, v + 1, 1, lanesInt32, lanesSum, comm_, nullptr), "lanesAllReduce (barrier)");
}

double RankRun::reduceTime(double seconds) {
  auto* v = reinterpret_cast<double*>(control_.get());
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
  auto* v = reinterpret_cast<int64_t*>(control_.get());
  v[0] = value;
  ok(lanesAllReduce(v, v + 1, 1, lanesInt64, lanesSum, comm_, nullptr), "lanesAllReduce (check)");
  return v[1];
}

void RankRun::printHeader() {
  // Every rank's line travels to rank 0 in an all-reduce: zeros elsewhere, so
  // the sum is a gather that needs no other collective.
  constexpr size_t kLine = 256;
  std::vector<uint8_t> lines(kLine * nranks_ * 2, 0);
  char line[kLine];
  std::snprintf(line, sizeof(line), "#  Rank %2d Group %2d Pid %6d on %10s device %2d [host] %s\n",
                rank_, 0, static_cast<int>(getpid()), hostName().c_str(), -1, "host memory");
  std::memcpy(lines.data() + kLine * rank_, line, std::strlen(line));
  ok(lanesAllReduce(lines.data(), lines.data() + kLine * nranks_, kLine * nranks_, lanesUint8,
                    lanesSum, comm_, nullptr),
     "lanesAllReduce (rank list)");
  if (!printer()) return;
  std::printf("# Collective test starting: %s\n", prog_);
  std::printf(
      "# nThread %d nGpus %d minBytes %llu maxBytes %llu step: %llu(%s) warmup iters: %d "
      "iters: %d agg iters: %d validation: %d graph: %d\n",
      nThreads_, nGpus_, static_cast<unsigned long long>(a_.minBytes),
      static_cast<unsigned long long>(a_.maxBytes),
      static_cast<unsigned long long>(a_.stepFactor > 1 ? a_.stepFactor : a_.stepBytes),
      a_.stepFactor > 1 ? "factor" : "bytes", a_.warmupIters, a_.iters, a_.aggIters, a_.check, 0);
  if (a_.blocking)
    std::printf("# Blocking Enabled: wait for completion and barrier after each collective \n");
  std::printf("#\n# Using devices\n");
  for (int r = 0; r < nranks_; ++r) {
    std::printf("%.*s", static_cast<int>(kLine),
                reinterpret_cast<const char*>(lines.data() + kLine * (nranks_ + r)));
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
  send_ = allocate(sendBytes);
  recv_ = allocate(recvBytes);
  control_ = allocate(64);
}

void RankRun::launch(const CollCounts& c, lanesDataType_t t, lanesRedOp_t op, bool inPlace) {
  const size_t ts = elementSize(t);
  uint8_t* recv = recv_.get();
  const uint8_t* send =
      inPlace ? recv + c.sendInplaceOffset * ts * static_cast<size_t>(rank_) : send_.get();
  if (inPlace) recv += c.recvInplaceOffset * ts * static_cast<size_t>(rank_);
  ok(spec_.run(send, recv, c.paramCount, t, op, a_.root, comm_), spec_.name);
}

void RankRun::fill(const CollCounts& c, const DataKey& key, bool inPlace) {
  const size_t ts = elementSize(key.type);
  std::memset(recv_.get(), 0, c.recvCount * ts);
  uint8_t* send =
      inPlace ? recv_.get() + c.sendInplaceOffset * ts * static_cast<size_t>(rank_) : send_.get();
  for (size_t i = 0; i < c.sendCount; ++i) storeElement(key.type, send, i, spec_.input(key, i));
}

int64_t RankRun::countWrong(const CollCounts& c, const DataKey& key, bool inPlace) const {
  const size_t ts = elementSize(key.type);
  const uint8_t* recv = recv_.get();
  if (inPlace) recv += c.recvInplaceOffset * ts * static_cast<size_t>(rank_);
  int64_t wrong = 0;
  for (size_t i = 0; i < c.recvCount; ++i) {
    auto e = spec_.expect(key, i);
    if (e && !matches(loadElement(key.type, recv, i), e->value, e->tolerance)) ++wrong;
  }
  return wrong;
}

Result RankRun::bench(uint64_t bytes, lanesDataType_t t, lanesRedOp_t op, bool inPlace) {
  const CollCounts c = countsFor(bytes, t);
  DataKey key{t, op, rank_, nranks_, a_.root, c.paramCount, 99};
  if (a_.check) fill(c, key, inPlace);  // time on valid numbers, as nccl-tests does
  launch(c, t, op, inPlace);
  barrier();

  const int total = a_.iters * a_.aggIters;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < total; ++i) launch(c, t, op, inPlace);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / total;
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
  allocateBuffers();
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
      std::string err;
      if (!json_.write(a_.jsonPath, spec_.name, nranks_, avg, errors_, &err)) {
        std::fprintf(stderr, "%s: %s\n", prog_, err.c_str());
      }
    }
  }
  return errors_ ? 1 : 0;
}

std::string baseName(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

}  // namespace

int perfMain(int argc, char** argv, const CollSpec& spec) {
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
  if (args.memory == Memory::Device) {
    std::fprintf(stderr,
                 "%s: --memory device needs the CUDA data path, which this build does not have "
                 "yet; use --memory host.\n",
                 prog.c_str());
    return 2;
  }

  if (launchedByLauncher()) {
    if (args.nThreads * args.nGpus != 1) {
      std::fprintf(stderr,
                   "%s: -t/-g ranks per process are not supported under a launcher; start one "
                   "rank per process (lanes-run -n N) or run without a launcher.\n",
                   prog.c_str());
      return 2;
    }
    lanesComm_t comm = nullptr;
    lanesResult_t r = lanesCommInitFromEnv(&comm, nullptr);
    if (r != lanesSuccess) {
      std::fprintf(stderr, "%s: lanesCommInitFromEnv failed: %s: %s\n", prog.c_str(),
                   lanesGetErrorString(r), lanesGetLastError(nullptr));
      return 1;
    }
    int rc = RankRun(args, spec, comm, prog.c_str(), 1, 1).run();
    lanesCommDestroy(comm);
    return rc;
  }

  // No launcher: nccl-tests' -t threads x -g "GPUs" per thread; on host
  // memory each is a rank, run here as one thread per rank.
  const int n = args.nThreads * args.nGpus;
  std::vector<lanesComm_t> comms(n, nullptr);
  lanesResult_t r = lanesCommInitAll(comms.data(), n, nullptr);
  if (r != lanesSuccess) {
    std::fprintf(stderr, "%s: lanesCommInitAll(%d) failed: %s: %s\n", prog.c_str(), n,
                 lanesGetErrorString(r), lanesGetLastError(nullptr));
    return 1;
  }
  std::vector<int> rcs(n, 0);
  {
    std::vector<std::jthread> threads;
    for (int i = 1; i < n; ++i) {
      threads.emplace_back([&, i] {
        rcs[i] = RankRun(args, spec, comms[i], prog.c_str(), args.nThreads, args.nGpus).run();
      });
    }
    rcs[0] = RankRun(args, spec, comms[0], prog.c_str(), args.nThreads, args.nGpus).run();
  }
  for (lanesComm_t c : comms) lanesCommDestroy(c);
  return *std::max_element(rcs.begin(), rcs.end());
}

}  // namespace lanes::perf
