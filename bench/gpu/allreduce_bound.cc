// lanes_allreduce_bound: a device all-reduce of 256 MiB float32 with N ranks
// sharing ONE GPU, on each of the staged path and host summation in turn
// (LANES_PROTO), against the bound each allows (docs/gpu_data_path.md):
// staged, the bytes it moves across that GPU's PCIe link each way over the
// both-ways bandwidth; host summation, the N downloads, N uploads and the
// host sum of N buffers run at once (perf/host_sum_bound.h). Both bounds are
// measured in the same run, just before the all-reduces. Ranks are threads
// of this process, or with --procs processes forked from it (the parent
// never touches CUDA). The paths host_sum_bf16 and host_sum_fp8 are host
// summation with LANES_WIRE set: for them the rows report the time and the
// error of the compressed sums (the largest error over the bound of
// docs/wire_formats.md, and relative to the exact sum, on a sample of the
// elements), and whether every rank holds the same bits.
//
//   lanes_allreduce_bound [--procs] [--ranks 2,4,8] [--paths staged,host_sum] [--bytes 256M]
//                         [--iters 10] [--warmup 3] [--gpu 0] [--sync-each]
//
// Exit code 0 when every result was right (the ratio is reported, not judged).
#include <cuda_runtime.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "lanes/lanes.h"
#include "perf/args.h"
#include "perf/copy_bounds.h"
#include "perf/cuda_owners.h"
#include "perf/host_sum_bound.h"
#include "perf/memory.h"
#include "perf/staged_bound.h"

namespace lanes::perf {
namespace {

using namespace std::chrono_literals;

struct Options {
  bool procs = false;
  std::vector<int> ranks{2, 4, 8};
  std::vector<std::string> paths{"staged", "host_sum"};
  size_t bytes = size_t{256} << 20;
  int iters = 10;
  int warmup = 3;
  int gpu = 0;
  bool syncEach = false;  // wait for each call before issuing the next
};

// The LANES_WIRE format of a compressed path's name, else null.
const char* wireOf(const std::string& path) {
  return path == "host_sum_bf16" ? "bf16" : path == "host_sum_fp8" ? "fp8" : nullptr;
}

const char* kUsage =
    "usage: lanes_allreduce_bound [--procs] [--ranks 2,4,8]\n"
    "                             [--paths staged,host_sum,host_sum_bf16,host_sum_fp8]\n"
    "                             [--bytes 256M] [--iters 10] [--warmup 3] [--gpu 0]\n"
    "                             [--sync-each]\n"
    "  All-reduce (float32 sum, device buffers) with N ranks on one GPU, as threads of this\n"
    "  process or (--procs) as forked processes, on each path of --paths (LANES_PROTO;\n"
    "  host_sum_bf16 and host_sum_fp8 set LANES_WIRE too); prints time, the path's bound\n"
    "  measured in the same run, and time/bound (the compressed paths: their error). The host "
    "time\n"
    "  spent inside lanesAllReduce is reported beside it; --sync-each waits for every call\n"
    "  before the next (no host enqueue runs ahead of the GPU).\n";

bool parseOptions(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    int64_t n = 0;
    if (f == "--procs") {
      o->procs = true;
    } else if (f == "--sync-each") {
      o->syncEach = true;
    } else if (f == "--threads") {
      o->procs = false;
    } else if (f == "--ranks") {
      const char* v = value();
      if (v == nullptr) return false;
      o->ranks.clear();
      std::string s = v;
      for (size_t pos = 0; pos <= s.size();) {
        size_t comma = s.find(',', pos);
        if (comma == std::string::npos) comma = s.size();
        if (!parsePerfInt(s.substr(pos, comma - pos), 1, 64, &n)) return false;
        o->ranks.push_back(static_cast<int>(n));
        pos = comma + 1;
      }
    } else if (f == "--paths") {
      const char* v = value();
      if (v == nullptr) return false;
      o->paths.clear();
      std::string s = v;
      for (size_t pos = 0; pos <= s.size();) {
        size_t comma = s.find(',', pos);
        if (comma == std::string::npos) comma = s.size();
        const std::string path = s.substr(pos, comma - pos);
        if (path != "staged" && path != "host_sum" && wireOf(path) == nullptr) return false;
        o->paths.push_back(path);
        pos = comma + 1;
      }
    } else if (f == "--bytes") {
      const char* v = value();
      uint64_t b = 0;
      if (v == nullptr || !parsePerfSize(v, &b) || b < 1024) return false;
      o->bytes = b / 16 * 16;
    } else if (f == "--iters" || f == "--warmup" || f == "--gpu") {
      const char* v = value();
      if (v == nullptr || !parsePerfInt(v, f == "--iters" ? 1 : 0, 1 << 20, &n)) return false;
      (f == "--iters" ? o->iters : f == "--warmup" ? o->warmup : o->gpu) = static_cast<int>(n);
    } else {
      return false;
    }
  }
  return !o->ranks.empty() && !o->paths.empty();
}

Status check(cudaError_t err, const char* call) {
  if (err == cudaSuccess) return Status::ok();
  return cudaError(std::string(call) + " failed: " + cudaGetErrorString(err));
}
#define BENCH_CUDA(call) LANES_RETURN_IF_ERROR(check((call), #call))

// What one rank does; rank 0 prints the row. Only stream-ordered CUDA calls
// between the first and the last barrier (docs/gpu_data_path.md).
class BoundRank {
 public:
  BoundRank(lanesComm_t comm, const Options& o, const char* mode, const std::string& path)
      : comm_(comm),
        o_(o),
        mode_(mode),
        path_(path),
        hostSum_(path.rfind("host_sum", 0) == 0),
        wire_(wireOf(path)) {
    lanesCommUserRank(comm, &rank_);
    lanesCommCount(comm, &n_);
  }

  // 0: every value right; 1: wrong values; a failure exits the process.
  int run() {
    must(selectGpu(o_.gpu), "cudaSetDevice");
    const size_t count = o_.bytes / sizeof(float);
    must(setup(count), "allocating buffers");
    barrier();
    CopyBounds b;
    HostSumBound sumBound;
    if (rank_ == 0) must(measureCopyBounds(kBoundBytes, &b), "measuring copy bandwidth");
    // The reducers' threads: the host's cores, at most 8 per rank (as Lanes sizes them).
    const int threads =
        std::min(8 * n_, static_cast<int>(std::max(1U, std::thread::hardware_concurrency())));
    if (rank_ == 0 && hostSum_ && wire_ == nullptr)
      must(measureHostSumBound(n_, o_.bytes, threads, &sumBound), "measuring the host sum bound");
    barrier();  // the others wait: nothing else on the GPU while rank 0 measures
    for (int i = 0; i < o_.warmup; ++i) allReduce(count);
    must(check(cudaStreamSynchronize(stream_.get()), "cudaStreamSynchronize"), "warm-up");
    barrier();
    using Clock = std::chrono::steady_clock;
    auto t0 = Clock::now();
    Clock::duration inCall{};  // host time inside lanesAllReduce
    for (int i = 0; i < o_.iters; ++i) {
      auto c0 = Clock::now();
      allReduce(count);
      inCall += Clock::now() - c0;
      if (o_.syncEach)
        must(check(cudaStreamSynchronize(stream_.get()), "cudaStreamSynchronize"), "timed loop");
    }
    must(check(cudaStreamSynchronize(stream_.get()), "cudaStreamSynchronize"), "timed loop");
    double seconds = std::chrono::duration<double>(Clock::now() - t0).count() / o_.iters;
    seconds = hostReduce(seconds, lanesMax);  // the slowest rank's time is the collective's
    const double callSeconds =
        hostReduce(std::chrono::duration<double>(inCall).count() / o_.iters, lanesMax);
    if (wire_ != nullptr) {
      const WireError e = checkWire(count);
      barrier();
      if (rank_ == 0) printWireRow(seconds, callSeconds, e);
      return e.overBound <= 1 && e.sameBits ? 0 : 1;
    }
    const double wrong = hostReduce(static_cast<double>(countWrong(count)), lanesSum);
    barrier();  // nobody frees while a peer's collective may still run
    if (rank_ == 0) printRow(b, sumBound, seconds, callSeconds, static_cast<int64_t>(wrong));
    return wrong == 0 ? 0 : 1;
  }

 private:
  void must(const Status& s, const char* what) {
    if (s) return;
    std::fprintf(stderr, "lanes_allreduce_bound: rank %d: %s: %s\n", rank_, what,
                 s.message().c_str());
    lanesCommAbort(comm_);
    std::_Exit(1);
  }
  void must(lanesResult_t r, const char* what) {
    if (r == lanesSuccess) return;
    must(Status(r, lanesGetLastError(comm_)), what);
  }

  Status setup(size_t count) {
    cudaStream_t s = nullptr;
    BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    stream_.reset(s);
    void* p = nullptr;
    BENCH_CUDA(cudaMalloc(&p, o_.bytes));
    send_.reset(p);
    BENCH_CUDA(cudaMalloc(&p, o_.bytes));
    recv_.reset(p);
    // rank r contributes r+1 everywhere: the sum N(N+1)/2 is exact in float32.
    // A compressed wire gets values that its rounding changes (valueOf).
    host_.assign(count, static_cast<float>(rank_ + 1));
    if (wire_ != nullptr)
      for (size_t i = 0; i < count; ++i) host_[i] = valueOf(rank_, i);
    BENCH_CUDA(cudaMemcpyAsync(send_.get(), host_.data(), o_.bytes, cudaMemcpyHostToDevice,
                               stream_.get()));
    BENCH_CUDA(cudaMemsetAsync(recv_.get(), 0, o_.bytes, stream_.get()));
    BENCH_CUDA(cudaStreamSynchronize(stream_.get()));
    return Status::ok();
  }

  void allReduce(size_t count) {
    must(lanesAllReduce(send_.get(), recv_.get(), count, lanesFloat32, lanesSum, comm_,
                        stream_.get()),
         "lanesAllReduce");
  }

  int64_t countWrong(size_t count) {
    must(check(cudaMemcpyAsync(host_.data(), recv_.get(), o_.bytes, cudaMemcpyDeviceToHost,
                               stream_.get()),
               "cudaMemcpyAsync"),
         "copying the result back");
    must(check(cudaStreamSynchronize(stream_.get()), "cudaStreamSynchronize"), "result");
    const float expect = static_cast<float>(n_) * (n_ + 1) / 2;
    return std::count_if(host_.begin(), host_.end(), [&](float v) { return v != expect; });
  }

  // Rank r's element i under a compressed wire: magnitudes below 64 over
  // thirteen binary orders, both signs, different on every rank.
  static float valueOf(int rank, size_t i) {
    uint64_t z =
        i * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(rank + 1) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;  // splitmix64's finaliser
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    const float mant = static_cast<float>(z >> 40) * 0x1p-23f - 1.0f;  // [-1, 1)
    return std::ldexp(mant, static_cast<int>((z >> 8) % 13) - 6);
  }

  struct WireError {
    double overBound = 0;    // the largest |error| / bound over the sample and the ranks
    double ofMagnitude = 0;  // the largest |error| / sum of |x| (the bound's scale)
    double ofSum = 0;        // the largest |error| / |exact sum| where that is >= sum |x| / 4
    bool sameBits = false;   // every rank's result hashes alike
  };

  // Every 257th element against the exact sum of every rank's values, and a
  // hash of the whole result compared across the ranks.
  WireError checkWire(size_t count) {
    must(check(cudaMemcpyAsync(host_.data(), recv_.get(), o_.bytes, cudaMemcpyDeviceToHost,
                               stream_.get()),
               "cudaMemcpyAsync"),
         "copying the result back");
    must(check(cudaStreamSynchronize(stream_.get()), "cudaStreamSynchronize"), "result");
    const bool fp8 = std::string(wire_) == "fp8";
    const double u = fp8 ? 0x1p-4 : 0x1p-8;
    // e4m3's subnormal floor relative to a frame's largest magnitude, at most
    // 64 N here (docs/wire_formats.md, "Host summation").
    const double floorTerm = fp8 ? (n_ + 1) * 0x1p-10 / 448 * 64.0 * n_ : 0;
    WireError e;
    for (size_t i = 0; i < count; i += 257) {
      double exact = 0, magnitudes = 0;
      for (int p = 0; p < n_; ++p) {
        const double v = valueOf(p, i);
        exact += v;
        magnitudes += std::fabs(v);
      }
      const double err = std::fabs(static_cast<double>(host_[i]) - exact);
      const double bound = (2 * u + n_ * 0x1p-24) * magnitudes + floorTerm;
      e.overBound = std::max(e.overBound, err / bound);
      e.ofMagnitude = std::max(e.ofMagnitude, err / magnitudes);
      if (std::fabs(exact) >= magnitudes / 4) e.ofSum = std::max(e.ofSum, err / std::fabs(exact));
    }
    uint64_t hash = 1469598103934665603ULL;  // FNV-1a over the result's bytes
    const auto* bytes = reinterpret_cast<const unsigned char*>(host_.data());
    for (size_t i = 0; i < o_.bytes; ++i) hash = (hash ^ bytes[i]) * 1099511628211ULL;
    const double h = static_cast<double>(hash >> 12);  // exact in a double
    e.sameBits = hostReduce(h, lanesMax) == hostReduce(h, lanesMin);
    e.overBound = hostReduce(e.overBound, lanesMax);
    e.ofMagnitude = hostReduce(e.ofMagnitude, lanesMax);
    e.ofSum = hostReduce(e.ofSum, lanesMax);
    return e;
  }

  void printWireRow(double seconds, double callSeconds, const WireError& e) const {
    std::printf("%5d  %-9s %-13s %10zu  %9.2f  (LANES_WIRE=%s)\n", n_, mode_, path_.c_str(),
                o_.bytes, seconds * 1e3, wire_);
    std::printf(
        "#      max error: %.3f of the bound, %.2e of sum|x|, %.2e of |sum|; every rank's bits "
        "%s; busbw %.2f GB/s; host time in the call %.2f ms (slowest rank)\n",
        e.overBound, e.ofMagnitude, e.ofSum, e.sameBits ? "alike" : "DIFFER",
        static_cast<double>(o_.bytes) / seconds / 1e9 * 2.0 * (n_ - 1) / n_, callSeconds * 1e3);
    std::fflush(stdout);
  }

  double hostReduce(double v, lanesRedOp_t op) {
    double in = v, out = 0;
    must(lanesAllReduce(&in, &out, 1, lanesFloat64, op, comm_, nullptr), "lanesAllReduce (host)");
    return out;
  }
  void barrier() { hostReduce(1, lanesSum); }

  void printRow(const CopyBounds& b, const HostSumBound& sum, double seconds, double callSeconds,
                int64_t wrong) const {
    // All N ranks are on this one GPU, so its link carries all their bytes:
    // host summation moves S each way per rank.
    const double s = static_cast<double>(o_.bytes);
    const LinkBytes bytes = hostSum_ ? LinkBytes{s * n_, s * n_} : stagedAllReduceBytes(s, n_, n_);
    const double bound = hostSum_ ? sum.seconds : linkBoundSeconds(bytes, b.bothH2d, b.bothD2h);
    const double target = hostSum_ ? 1.1 : 1.2;
    std::printf(
        "%5d  %-9s %-8s %10zu  %9.2f  %8.2f  %8.2f  %8.2f  %8.2f  %8.3f  %8.3f  %9.3f  %6lld\n", n_,
        mode_, hostSum_ ? "host_sum" : "staged", o_.bytes, seconds * 1e3, b.h2d, b.d2h, b.bothH2d,
        b.bothD2h, bytes.down / 1e9, bytes.up / 1e9, bound * 1e3, static_cast<long long>(wrong));
    if (hostSum_)
      std::printf("#      bound parts: copies %.2f ms, host sum %.2f ms (at once)\n",
                  sum.linkSeconds * 1e3, sum.sumSeconds * 1e3);
    std::printf(
        "#      time/bound = %.3f (target <= %.2f: %s); busbw %.2f GB/s; host time in the call "
        "%.2f ms (slowest rank)%s\n",
        seconds / bound, target, seconds / bound <= target ? "met" : "NOT met",
        static_cast<double>(o_.bytes) / seconds / 1e9 * 2.0 * (n_ - 1) / n_, callSeconds * 1e3,
        o_.syncEach ? "; each call waited for" : "");
    std::fflush(stdout);
  }

  lanesComm_t comm_;
  const Options& o_;
  const char* mode_;
  std::string path_;
  bool hostSum_;
  const char* wire_;  // LANES_WIRE of a compressed path, else null
  int rank_ = 0, n_ = 1;
  Stream stream_;
  std::unique_ptr<void, DeviceFree> send_, recv_;
  std::vector<float> host_;
};

void printHeader(const Options& o) {
  std::printf(
      "# lanes_allreduce_bound: all-reduce float32 sum on device buffers, N ranks on GPU %d,\n"
      "# %d warm-up + %d timed calls (time: the slowest rank's mean per call).\n"
      "# Bound of the staged path (docs/gpu_data_path.md): per rank down (D2H) = S,\n"
      "# up (H2D) = 2(N-1)/N x S; all N ranks share this GPU, so its link carries N times\n"
      "# that; bound = max(down / both-ways D2H, up / both-ways H2D), bandwidths measured\n"
      "# by rank 0 just before the all-reduces (cudaMemcpyAsync %zu MiB, pinned).\n"
      "# Bound of host summation: N downloads and N uploads of S and the host sum of N\n"
      "# buffers of S, all at once, timed by rank 0 just before the all-reduces.\n"
      "# GB/s = 1e9 B/s; GB = 1e9 B.\n",
      o.gpu, o.warmup, o.iters, kBoundBytes >> 20);
  std::printf("# %3s  %-9s %-8s %10s  %9s  %8s  %8s  %8s  %8s  %8s  %8s  %9s  %6s\n", "N",
              "ranks as", "path", "bytes", "time(ms)", "H2D", "D2H", "both:H2D", "both:D2H",
              "down GB", "up GB", "bound(ms)", "#wrong");
  std::fflush(stdout);
}

// N ranks as threads of this process, all on o.gpu.
int runThreads(const Options& o, int n, const std::string& path) {
  std::vector<int> devlist(n, o.gpu);
  std::vector<lanesComm_t> comms(n, nullptr);
  lanesResult_t r = lanesCommInitAll(comms.data(), n, devlist.data());
  if (r != lanesSuccess) {
    std::fprintf(stderr, "lanes_allreduce_bound: lanesCommInitAll(%d) failed: %s\n", n,
                 lanesGetLastError(nullptr));
    return 1;
  }
  std::vector<int> rcs(n, 0);
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, i] { rcs[i] = BoundRank(comms[i], o, "threads", path).run(); });
    }
  }
  for (lanesComm_t c : comms) lanesCommDestroy(c);
  return *std::max_element(rcs.begin(), rcs.end());
}

// Reads exactly `len` bytes within `seconds`; false on EOF, error or timeout.
bool readFully(int fd, void* buf, size_t len, int seconds) {
  auto* p = static_cast<uint8_t*>(buf);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (len > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(left)) <= 0) continue;
    ssize_t got = read(fd, p, len);
    if (got <= 0) return false;
    p += got;
    len -= static_cast<size_t>(got);
  }
  return true;
}

// N ranks as processes. The children are forked while this process is still
// single-threaded and CUDA-free; the parent then makes the unique id (which
// starts the bootstrap root here) and hands it to each child over a pipe.
int runProcs(const Options& o, int n, const std::string& path) {
  std::fflush(stdout);
  std::vector<pid_t> pids;
  std::vector<int> pipes;
  for (int rank = 0; rank < n; ++rank) {
    int fds[2];
    if (pipe(fds) != 0) {
      std::perror("lanes_allreduce_bound: pipe");
      return 1;
    }
    pid_t pid = fork();
    if (pid < 0) {
      std::perror("lanes_allreduce_bound: fork");
      return 1;
    }
    if (pid == 0) {
      close(fds[1]);
      for (int fd : pipes) close(fd);
      lanesUniqueId id;
      if (!readFully(fds[0], &id, sizeof(id), 60)) {
        std::fprintf(stderr, "lanes_allreduce_bound: rank %d got no unique id from its parent\n",
                     rank);
        std::_Exit(1);
      }
      close(fds[0]);
      Status st = selectGpu(o.gpu);  // the communicator takes the current GPU
      if (!st) {
        std::fprintf(stderr, "lanes_allreduce_bound: rank %d: %s\n", rank, st.message().c_str());
        std::_Exit(1);
      }
      lanesComm_t comm = nullptr;
      if (lanesCommInitRank(&comm, n, id, rank) != lanesSuccess) {
        std::fprintf(stderr, "lanes_allreduce_bound: rank %d: lanesCommInitRank failed: %s\n", rank,
                     lanesGetLastError(nullptr));
        std::_Exit(1);
      }
      int rc = BoundRank(comm, o, "processes", path).run();
      lanesCommDestroy(comm);
      std::fflush(stdout);
      std::_Exit(rc);
    }
    close(fds[0]);
    pids.push_back(pid);
    pipes.push_back(fds[1]);
  }
  lanesUniqueId id;
  int rc = 0;
  if (lanesGetUniqueId(&id) != lanesSuccess) {
    std::fprintf(stderr, "lanes_allreduce_bound: lanesGetUniqueId failed: %s\n",
                 lanesGetLastError(nullptr));
    rc = 1;
  }
  for (int fd : pipes) {
    if (rc == 0 && write(fd, &id, sizeof(id)) != static_cast<ssize_t>(sizeof(id))) rc = 1;
    close(fd);  // a child without an id reads EOF and exits
  }
  // Bounded: Lanes times out a stuck collective (LANES_TIMEOUT, default 300 s);
  // past that and a margin the children are killed.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(420);
  bool killed = false;
  size_t left = pids.size();
  while (left > 0) {
    int status = 0;
    pid_t done = waitpid(-1, &status, WNOHANG);
    if (done > 0) {
      --left;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        // The others would wait for the failed rank until Lanes' timeout:
        // give them 10 s to notice by themselves.
        if (rc == 0) deadline = std::min(deadline, std::chrono::steady_clock::now() + 10s);
        rc = 1;
      }
      continue;
    }
    if (done < 0) break;
    if (!killed && std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "lanes_allreduce_bound: %d-process run did not finish; killing it\n", n);
      for (pid_t p : pids) kill(p, SIGKILL);
      rc = 1;
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return rc;
}

}  // namespace
}  // namespace lanes::perf

int main(int argc, char** argv) {
  using namespace lanes::perf;
  // The bound is the host-staged transport's: ranks on one GPU would take the
  // P2P slots otherwise (LANES_P2P_DISABLE=0 measures those instead).
  setenv("LANES_P2P_DISABLE", "1", 0);
  setvbuf(stdout, nullptr, _IOLBF, 0);
  Options o;
  if (!parseOptions(argc, argv, &o)) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  // Before any CUDA call: up to 8 ranks' streams on one GPU (threads only).
  int mostRanks = 1;
  for (int n : o.ranks) mostRanks = std::max(mostRanks, n);
  requestDeviceConnections(o.procs ? 1 : mostRanks);
  // Threads: check the GPU here. Processes: the parent stays CUDA-free (it
  // forks), so each child reports a missing GPU itself.
  if (!o.procs && o.gpu >= visibleGpus()) {
    std::fprintf(stderr, "lanes_allreduce_bound: GPU %d is not visible (%d CUDA devices).\n", o.gpu,
                 visibleGpus());
    return 2;
  }
  printHeader(o);
  int rc = 0;
  for (int n : o.ranks) {
    for (const std::string& path : o.paths) {
      // Read at each communicator's init.
      setenv("LANES_PROTO", wireOf(path) != nullptr ? "host_sum" : path.c_str(), 1);
      if (wireOf(path) != nullptr)
        setenv("LANES_WIRE", wireOf(path), 1);
      else
        unsetenv("LANES_WIRE");
      rc = std::max(rc, o.procs ? runProcs(o, n, path) : runThreads(o, n, path));
    }
  }
  if (o.procs) {
    std::printf("# processes: forked from a CUDA-free parent, one CUDA context each.\n");
  }
  return rc;
}
