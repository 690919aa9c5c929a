#include "perf/rank_run.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "base/host_id.h"
#include "core/plan_record.h"
#include "perf/backend_nccl.h"
#include "perf/bound_model.h"
#include "perf/cpu_share.h"
#include "perf/element.h"
#include "perf/host_copy.h"
#include "perf/pattern.h"
#include "perf/report.h"
#include "perf/run_env.h"

extern char** environ;

namespace lanes::perf {
namespace {

std::string fromSlot(const uint8_t* p) {
  const char* c = reinterpret_cast<const char*>(p);
  return std::string(c, strnlen(c, kLine));
}

}  // namespace

RankRun::RankRun(const PerfArgs& args, const CollSpec& spec, lanesComm_t comm,
                 const RunSetup& setup)
    : a_(args), spec_(spec), comm_(comm), setup_(setup) {
  lanesCommUserRank(comm, &rank_);
  lanesCommCount(comm, &nranks_);
  graph_ = setup.memory == Memory::Device ? args.graphLaunches : 0;
  corruptPending_ = setup.corrupt;
}

void RankRun::ok(const Status& s, const char* what) const {
  if (s) return;
  std::fflush(stdout);
  std::fprintf(stderr, "%s: rank %d (GPU %d): %s: %s\n", setup_.tool.c_str(), rank_, gpu_, what,
               s.message().c_str());
  std::fflush(stderr);
  for (const auto& b : backends_) {
    if (std::string(b->name()) != "lanes") b->abort();
  }
  lanesCommAbort(comm_);
  std::_Exit(1);  // the other ranks learn of it from Lanes (or lanes-run)
}

void RankRun::okLanes(lanesResult_t r, const char* what) const {
  if (r == lanesSuccess) return;
  ok(Status(r, std::string(lanesGetErrorString(r)) + ": " + lanesGetLastError(comm_)), what);
}

void RankRun::barrier() {
  auto* v = reinterpret_cast<int32_t*>(control_.data());
  v[0] = 1;
  okLanes(lanesAllReduce(v, v + 1, 1, lanesInt32, lanesSum, comm_, nullptr),
          "lanesAllReduce (barrier)");
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
  okLanes(lanesAllReduce(v, v + 1, 1, lanesFloat64, op, comm_, nullptr), "lanesAllReduce (timing)");
  return a_.average == 1 ? v[1] / nranks_ : v[1];
}

int64_t RankRun::sumAll(int64_t value) {
  auto* v = reinterpret_cast<int64_t*>(control_.data());
  v[0] = value;
  okLanes(lanesAllReduce(v, v + 1, 1, lanesInt64, lanesSum, comm_, nullptr),
          "lanesAllReduce (check)");
  return v[1];
}

// Every rank's `perRank` values, in rank order, on every rank: each puts its
// own in its slot and zeros elsewhere, so a sum all-reduce (host memory) is
// an all-gather that needs no other collective.
template <typename T>
std::vector<T> RankRun::gather(const T* mine, size_t perRank, lanesDataType_t type) {
  std::vector<T> all(perRank * nranks_ * 2, T{});
  std::copy(mine, mine + perRank, all.begin() + perRank * rank_);
  okLanes(lanesAllReduce(all.data(), all.data() + perRank * nranks_, perRank * nranks_, type,
                         lanesSum, comm_, nullptr),
          "lanesAllReduce (gather)");
  all.erase(all.begin(), all.begin() + perRank * nranks_);
  return all;
}
template std::vector<uint8_t> RankRun::gather(const uint8_t*, size_t, lanesDataType_t);
template std::vector<double> RankRun::gather(const double*, size_t, lanesDataType_t);

// Host, GPU, pid and GPU label of every rank, on every rank; on rank 0 the
// note when a host's ranks outnumber its CPUs.
void RankRun::gatherPlaces() {
  constexpr size_t kIds = 3 + kCpuMaskWords;
  uint64_t ids[kIds] = {hostHash(), static_cast<uint64_t>(gpu_ + 1),
                        static_cast<uint64_t>(getpid())};
  const CpuMask mine = allowedCpus();
  std::copy(mine.begin(), mine.end(), ids + 3);
  std::vector<uint64_t> all = gather(ids, kIds, lanesUint64);
  uint8_t text[kLine] = {};
  const std::string label = gpu_ >= 0 ? gpuLabel(gpu_) : "[host] host memory";
  std::snprintf(reinterpret_cast<char*>(text), kLine, "%s|%s", hostName().c_str(), label.c_str());
  std::vector<uint8_t> texts = gather(text, kLine, lanesUint8);
  places_.clear();
  std::vector<RankCpus> cpus;
  for (int r = 0; r < nranks_; ++r) {
    Place p;
    const uint64_t* id = all.data() + kIds * r;
    p.hostHash = id[0];
    p.gpu = static_cast<int>(id[1]) - 1;
    p.pid = static_cast<int>(id[2]);
    std::string t = fromSlot(texts.data() + kLine * r);
    size_t bar = t.find('|');
    p.host = t.substr(0, bar);
    p.label = bar == std::string::npos ? "" : t.substr(bar + 1);
    cpus.push_back({p.hostHash, p.host, CpuMask(id + 3, id + kIds)});
    places_.push_back(std::move(p));
    if (printer()) json_.addPlace({r, places_[r].host, places_[r].gpu, places_[r].label});
  }
  if (printer()) {
    std::string note = oversubscriptionNote(cpus);
    if (!note.empty()) headerNotes_.push_back(std::move(note));
  }
}

// The backends, in row order. NCCL is opened on every rank; its id goes from
// rank 0 to the others over the Lanes communicator, as every other rank-0
// fact does. Returns 0, or the run's exit code when it cannot go on.
int RankRun::setupBackends() {
  const bool nccl = a_.backend == Backend::Nccl || a_.compare;
  if (a_.backend == Backend::Lanes) backends_.push_back(makeLanesBackend(comm_));
  if (!nccl) return 0;
  std::shared_ptr<const NcclLibrary> lib;
  Status opened = openNccl(&lib);
  if (sumAll(opened ? 0 : 1) > 0) {
    if (!opened)
      std::fprintf(stderr, "%s: rank %d: %s\n", setup_.tool.c_str(), rank_,
                   opened.message().c_str());
    return 1;
  }
  // NCCL refuses two ranks on one GPU ("Duplicate GPU detected"): say so
  // before it does, naming the ranks. Lanes' drop-in allows it.
  for (int r = 0; r < nranks_ && !ncclIsLanesLayer(*lib); ++r) {
    for (int q = 0; q < r; ++q) {
      if (places_[q].hostHash != places_[r].hostHash || places_[q].gpu != places_[r].gpu) continue;
      std::string why = "NCCL refuses two ranks on one GPU, and ranks " + std::to_string(q) +
                        " and " + std::to_string(r) + " are both on GPU " +
                        std::to_string(places_[r].gpu) + " of " + places_[r].host +
                        ". Run one rank per GPU for NCCL (-g/-t or lanes-run -n at most the "
                        "GPUs visible), or time Lanes alone (--backend lanes), which allows it.";
      if (a_.compare) {
        if (printer()) {
          headerNotes_.push_back("# --compare nccl: NCCL skipped: " + why + "\n");
          std::fprintf(stderr, "%s: --compare nccl: NCCL skipped: %s\n", setup_.tool.c_str(),
                       why.c_str());
        }
        return 0;
      }
      if (printer())
        std::fprintf(stderr, "%s: --backend nccl: %s\n", setup_.tool.c_str(), why.c_str());
      return 2;
    }
  }
  // Rank 0's id (with a flag saying it got one) to every rank.
  NcclId id;
  Status made = rank_ == 0 ? ncclNewId(*lib, &id) : Status::ok();
  uint8_t* v = control_.data();
  std::memset(v, 0, control_.size());
  v[0] = made ? 1 : 0;
  std::memcpy(v + 8, id.bytes, sizeof(id.bytes));
  okLanes(lanesBroadcast(v, v, 8 + sizeof(id.bytes), lanesUint8, 0, comm_, nullptr),
          "lanesBroadcast (NCCL id)");
  if (v[0] != 1) {
    if (printer()) std::fprintf(stderr, "%s: %s\n", setup_.tool.c_str(), made.message().c_str());
    return 1;
  }
  std::memcpy(id.bytes, v + 8, sizeof(id.bytes));
  std::unique_ptr<CollBackend> b;
  Status st = makeNcclBackend(lib, id, rank_, nranks_, &b);
  if (sumAll(st ? 0 : 1) > 0) {
    if (!st) {
      std::fprintf(stderr, "%s: rank %d (GPU %d): %s\n", setup_.tool.c_str(), rank_, gpu_,
                   st.message().c_str());
    }
    return 1;
  }
  backends_.push_back(std::move(b));
  return 0;
}

void RankRun::printHeader() {
  char line[kLine] = {};
  std::snprintf(line, sizeof(line), "#  Rank %2d Group %2d Pid %6d on %10s device %2d %s\n", rank_,
                0, static_cast<int>(getpid()), hostName().c_str(), gpu_,
                places_[rank_].label.c_str());
  std::vector<uint8_t> lines = gather(reinterpret_cast<const uint8_t*>(line), kLine, lanesUint8);
  if (!printer()) return;
  std::printf("# Collective test starting: %s\n", setup_.tool.c_str());
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
  for (int r = 0; r < nranks_; ++r) std::printf("%s", fromSlot(lines.data() + kLine * r).c_str());
  std::printf("# Memory: %s\n",
              setup_.memory == Memory::Device
                  ? (a_.streamNull ? "device (cudaMalloc; the legacy default stream, -y 1)"
                                   : "device (cudaMalloc; one non-blocking stream per rank)")
                  : "host");
  std::string names;
  for (const auto& b : backends_) names += (names.empty() ? "" : ", then ") + b->describe();
  std::printf("# Backend: %s%s\n", names.c_str(),
              comparing() ? " at each size; ratio = lanes busbw / nccl busbw" : "");
  std::printf("# Environment (lanes): %s\n", envLine(prefixedEnv(environ, "LANES_")).c_str());
  if (a_.backend == Backend::Nccl || a_.compare)
    std::printf("# Environment (nccl): %s\n", envLine(prefixedEnv(environ, "NCCL_")).c_str());
  if (!setup_.note.empty()) std::printf("%s", setup_.note.c_str());
  for (const std::string& l : headerNotes_) std::printf("%s", l.c_str());
  // nccl-tests' three header lines, with the extra columns appended.
  std::string head = columnHeader();
  std::vector<std::string> h;
  for (size_t at = 0, nl; (nl = head.find('\n', at)) != std::string::npos; at = nl + 1)
    h.push_back(head.substr(at, nl - at));
  std::printf("#\n%s\n", h[0].c_str());
  for (int i = 1; i <= 2; ++i) {
    std::printf("%s%s%s\n", h[i].c_str(), setup_.bounds ? boundHeader(i - 1).c_str() : "",
                comparing() ? compareHeader(i - 1).c_str() : "");
  }
  std::fflush(stdout);
}

Status RankRun::tryLaunch(CollBackend& b, const CollCounts& c, lanesDataType_t t, lanesRedOp_t op,
                          bool inPlace) {
  const size_t ts = elementSize(t);
  uint8_t* recv = mem_->recv();
  const uint8_t* send =
      inPlace ? recv + c.sendInplaceOffset * ts * static_cast<size_t>(rank_) : mem_->send();
  if (inPlace) recv += c.recvInplaceOffset * ts * static_cast<size_t>(rank_);
  return spec_.run(b, *mem_, {send, recv, c.paramCount, t, op, a_.root, mem_->stream()});
}

// As nccl-tests: iters x agg collectives back to back, then wait for the
// stream; wall clock around both, per collective. *cpuSeconds: until the
// last call returned, before the wait (-C).
void RankRun::timeLoop(CollBackend& b, const CollCounts& c, lanesDataType_t t, lanesRedOp_t op,
                       bool inPlace, double* seconds, double* cpuSeconds) {
  const int total = a_.iters * a_.aggIters;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < total; ++i) {
    ok(tryLaunch(b, c, t, op, inPlace), spec_.name);
    if (a_.blocking) ok(mem_->wait(), "waiting for the stream");
  }
  auto t1 = std::chrono::steady_clock::now();
  ok(mem_->wait(), "waiting for the stream");
  *cpuSeconds = std::chrono::duration<double>(t1 - t0).count() / total;
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / total;
}

// -G: capture the loop into a graph and time graph_ launches of it. False
// (on every rank alike) when any rank's library call refused the capture;
// then graph mode is off for the rest of the run, said once.
bool RankRun::timeGraph(CollBackend& b, const CollCounts& c, lanesDataType_t t, lanesRedOp_t op,
                        bool inPlace, double* seconds, double* cpuSeconds) {
  const int total = a_.iters * a_.aggIters;
  ok(mem_->beginCapture(), "cudaStreamBeginCapture");
  Status r = Status::ok();
  for (int i = 0; i < total && r; ++i) r = tryLaunch(b, c, t, op, inPlace);
  Status ended = mem_->endCapture(r.isOk());
  const bool refused = !r || !ended;
  if (sumAll(refused ? 1 : 0) > 0) {  // also the barrier before timing
    if (printer()) {
      std::printf("# -G %d: CUDA Graph capture of %s (%s) was refused: %s\n", graph_, spec_.name,
                  b.name(),
                  refused ? (!r ? r.message().c_str() : ended.message().c_str())
                          : "(refused on another rank)");
      std::printf("# -G: timing without graphs from here on.\n");
      std::fflush(stdout);
    }
    graph_ = 0;
    return false;
  }
  auto t0 = std::chrono::steady_clock::now();
  for (int l = 0; l < graph_; ++l) ok(mem_->launchGraph(), "cudaGraphLaunch");
  auto t1 = std::chrono::steady_clock::now();
  ok(mem_->wait(), "waiting for the stream");
  const double ops = static_cast<double>(total) * graph_;
  *cpuSeconds = std::chrono::duration<double>(t1 - t0).count() / ops;
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / ops;
  return true;
}

RankRun::Result RankRun::bench(CollBackend& b, uint64_t bytes, lanesDataType_t t, lanesRedOp_t op,
                               bool inPlace) {
  const CollCounts c = countsFor(bytes, t);
  DataKey key{t, op, rank_, nranks_, a_.root, c.paramCount, 99};
  if (a_.check) fill(c, key, inPlace);  // time on valid numbers, as nccl-tests does
  ok(tryLaunch(b, c, t, op, inPlace), spec_.name);
  // Before the driver's own traffic on the communicator (barriers, checks).
  const std::string plan = std::string(b.name()) == "lanes" ? lastPlanOf(comm_) : "";
  ok(mem_->wait(), "waiting for the stream");

  barrier();
  double seconds = 0, cpu = 0;
  // timeGraph lines the ranks up again (its capture verdict is an all-reduce).
  if (graph_ == 0 || !timeGraph(b, c, t, op, inPlace, &seconds, &cpu))
    timeLoop(b, c, t, op, inPlace, &seconds, &cpu);
  seconds = reduceTime(seconds);

  Result res;
  res.plan = plan;
  res.timeUs = seconds * 1e6;
  res.cpuUs = cpu * 1e6;  // rank-local, as nccl-tests reports it
  res.algBw = spec_.algBytes(c.paramCount, elementSize(t), nranks_) / 1e9 / seconds;
  res.busBw = res.algBw * spec_.busFactor(nranks_);
  if (a_.check && (!inPlace || checksInPlace(spec_, b.name()))) {
    res.wrong = 0;
    for (int k = 0; k < a_.check && res.wrong == 0; ++k) {
      key.seed = 100 + static_cast<uint64_t>(k) + bytes % 97;
      fill(c, key, inPlace);
      ok(tryLaunch(b, c, t, op, inPlace), spec_.name);
      res.wrong = sumAll(countWrong(c, key, inPlace));
    }
    if (res.wrong != 0) ++errors_;
  }
  return res;
}

void RankRun::sweep(lanesDataType_t t, lanesRedOp_t op) {
  barrier();
  for (auto& b : backends_) {
    for (uint64_t bytes : {a_.maxBytes, a_.minBytes}) {
      const CollCounts c = countsFor(bytes, t);
      for (int i = 0; i < a_.warmupIters; ++i) ok(tryLaunch(*b, c, t, op, false), spec_.name);
    }
    ok(mem_->wait(), "waiting for the stream");
  }
  const char* typeName = perfTypeName(t);
  const char* opName = spec_.reduces ? perfOpName(op) : "none";
  const int root = spec_.rooted ? a_.root : -1;
  const size_t ts = elementSize(t);
  for (uint64_t bytes : sweepSizes(a_)) {
    const CollCounts c = countsFor(bytes, t);
    const uint64_t shown = std::max(c.sendCount, c.recvCount) * ts;
    const std::optional<double> bound = boundFor(c, ts);
    Result first[2];
    for (size_t k = 0; k < backends_.size(); ++k) {
      CollBackend& b = *backends_[k];
      Result oop = bench(b, bytes, t, op, false);
      Result ip;
      if (spec_.inPlace) ip = bench(b, bytes, t, op, true);
      bwSum_[k] += oop.busBw;
      ++bwCount_[k];
      if (k == 0) {
        first[0] = oop;
        first[1] = ip;
      }
      if (!printer()) continue;
      auto shownTime = [&](const Result& r) { return a_.reportCpuTime ? r.cpuUs : r.timeUs; };
      std::string row =
          rowParams(shown, c.paramCount, typeName, opName, root) +
          rowResult(shownTime(oop), oop.algBw, oop.busBw, oop.wrong) +
          (spec_.inPlace ? rowResult(shownTime(ip), ip.algBw, ip.busBw, ip.wrong) : rowSkipped());
      if (setup_.bounds) row += boundColumns(bound.value_or(0), oop.busBw);
      if (comparing()) {
        const bool other = k > 0;
        row += compareColumns(b.name(), other && oop.busBw > 0 ? first[0].busBw / oop.busBw : 0,
                              other && ip.busBw > 0 ? first[1].busBw / ip.busBw : 0);
      }
      std::printf("%s\n", row.c_str());
      std::fflush(stdout);
      json_.addRow({b.name(),
                    shown,
                    c.paramCount,
                    typeName,
                    opName,
                    root,
                    oop.plan,
                    bound,
                    {shownTime(oop), oop.algBw, oop.busBw, oop.wrong},
                    {shownTime(ip), ip.algBw, ip.busBw, ip.wrong}});
    }
    saveJson(false);
  }
}

void RankRun::footer() {
  if (!printer()) return;
  auto avg = [&](size_t k) { return bwCount_[k] ? bwSum_[k] / bwCount_[k] : 0.0; };
  std::printf("# Out of bounds values : %d %s\n", errors_, errors_ ? "FAILED" : "OK");
  std::printf("# Avg bus bandwidth    : %g \n", backends_.empty() ? 0.0 : avg(0));
  for (size_t k = 1; k < backends_.size(); ++k) {
    std::printf("# Avg bus bandwidth %s: %g (lanes/%s %.2f)\n", backends_[k]->name(), avg(k),
                backends_[k]->name(), avg(k) > 0 ? avg(0) / avg(k) : 0.0);
  }
  std::printf("#\n");
  std::fflush(stdout);
  saveJson(true);
}

// -J on rank 0: the rows so far, rewritten as the sweep goes so that a run
// killed part-way keeps its finished sizes (json_report.h); each failure
// reason is printed once.
void RankRun::saveJson(bool complete) {
  if (!printer() || a_.jsonPath.empty()) return;
  auto avg = [&](size_t k) { return bwCount_[k] ? bwSum_[k] / bwCount_[k] : 0.0; };
  JsonReport::Footer f;
  f.avgBusBw = backends_.empty() ? 0.0 : avg(0);
  for (size_t k = 0; k < backends_.size(); ++k)
    f.avgByBackend.emplace_back(backends_[k]->name(), avg(k));
  f.errors = errors_;
  f.complete = complete;
  json_.setGraphLaunches(graph_);
  std::string err;
  if (!json_.save(a_.jsonPath, f, &err) && err != jsonError_) {
    std::fprintf(stderr, "%s: %s\n", setup_.tool.c_str(), err.c_str());
    jsonError_ = err;
  }
}

int RankRun::run() {
  if (spec_.rooted && a_.root >= nranks_) {
    if (printer()) {
      std::fprintf(stderr, "%s: -r %d is not a rank of this %d-rank run.\n", setup_.tool.c_str(),
                   a_.root, nranks_);
    }
    return 2;
  }
  if (setup_.memory == Memory::Device) {
    // The communicator's GPU, made current in this rank's own thread.
    lanesCommCuDevice(comm_, &gpu_);
    ok(selectGpu(gpu_), "selecting the rank's GPU");
  }
  JsonReport::Header h;
  h.tool = setup_.tool;
  h.collective = spec_.key;
  h.memory = setup_.memory == Memory::Device ? "device" : "host";
  h.command = setup_.command;
  h.nranks = nranks_;
  h.graphLaunches = graph_;
  h.environment = prefixedEnv(environ, "LANES_");
  for (auto& kv : prefixedEnv(environ, "NCCL_")) h.environment.push_back(std::move(kv));
  json_.setHeader(std::move(h));

  gatherPlaces();
  allocateBuffers();
  if (setup_.bounds) measureBounds();
  if (int rc = setupBackends(); rc != 0) {
    barrier();
    return rc;
  }
  bwSum_.assign(backends_.size(), 0.0);
  bwCount_.assign(backends_.size(), 0);
  printHeader();
  saveJson(false);  // replaces a previous run's file before the first size
  if (!spec_.acceptsRanks(nranks_)) {
    if (printer()) std::printf("nRanks %d is not a power of 2, skipping\n", nranks_);
  } else {
    for (int cycle = 0; a_.runCycles == 0 || cycle < a_.runCycles; ++cycle) {
      for (lanesDataType_t t : a_.types) {
        if (spec_.reduces) {
          for (lanesRedOp_t op : a_.ops) sweep(t, op);
        } else {
          sweep(t, lanesSum);
        }
      }
    }
  }
  footer();
  // Every rank's device work is finished before any rank frees its buffers
  // (cudaFree waits for the whole GPU, a peer's parked stream included).
  ok(mem_->wait(), "waiting for the stream");
  barrier();
  backends_.clear();  // NCCL communicators end here, before the buffers
  return errors_ ? 1 : 0;
}

}  // namespace lanes::perf
