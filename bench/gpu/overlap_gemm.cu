// lanes_overlap_gemm: how much of a large matrix multiply's throughput survives
// while all-reduces run beside it. Lanes moves bulk bytes with the copy engines
// and uses SMs only for short reduce kernels, so the GEMM should keep most of
// its speed (issue target: >= 90% of solo); NCCL's kernels take SMs for the
// whole transfer, which --compare nccl shows next to it.
//
//   1. solo: a cuBLAS GEMM (bf16 in/out, fp32 accumulate, tensor ops; 8192^3 by
//      default) looped on every GEMM GPU at once for about --seconds; each
//      GPU's TFLOP/s from CUDA events on its own stream.
//   2. all-reduce alone: the ranks, each on its own thread and non-blocking
//      stream, time a float32 sum of --bytes.
//   3. concurrent: the ranks enqueue enough all-reduces to outlast the GEMM
//      window, then the same GEMM loops run again; per GPU the TFLOP/s, the
//      fraction of solo, and whether the all-reduces on that GPU were still
//      running when its last GEMM ended ("covered"; if not, the fraction
//      overstates and the tool exits 3).
//
// Placement: --gpus 0 (default) puts --ranks Lanes thread ranks on GPU --gpu and
// one GEMM there; --gpus N puts one rank on each of GPUs 0..N-1 and a GEMM on
// every one of them. --backend picks the library, --compare runs the other
// one afterwards in the same process (NCCL needs --gpus: it refuses two ranks
// on one GPU).
//
// C API only here: nvcc builds this file as C++17. The backends live in
// overlap_collective.{h,cc} (C++20, over bench/perf's Lanes/NCCL backends);
// flags in overlap_options.{h,cc}, printing and JSON in overlap_report.{h,cc}.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpu/overlap_collective.h"
#include "gpu/overlap_options.h"
#include "gpu/overlap_report.h"

extern char** environ;

namespace {

using lanes_overlap::Collective;
using lanes_overlap::GpuRow;
using lanes_overlap::Options;
using lanes_overlap::Run;

[[noreturn]] void die(const std::string& what) {
  std::fflush(stdout);
  std::fprintf(stderr, "lanes_overlap_gemm: %s\n", what.c_str());
  std::_Exit(1);
}
void cudaOk(cudaError_t e, const char* call) {
  if (e != cudaSuccess) die(std::string(call) + " failed: " + cudaGetErrorString(e));
}
void cublasOk(cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS)
    die(std::string(call) + " failed: cuBLAS status " + std::to_string(static_cast<int>(s)));
}
#define CUDA_OK(call) cudaOk((call), #call)
#define CUBLAS_OK(call) cublasOk((call), #call)

struct DeviceFree {
  void operator()(void* p) const { cudaFree(p); }
};
struct StreamDestroy {
  void operator()(CUstream_st* s) const { cudaStreamDestroy(s); }
};
struct EventDestroy {
  void operator()(CUevent_st* e) const { cudaEventDestroy(e); }
};
struct CublasDestroy {
  void operator()(cublasContext* h) const { cublasDestroy(h); }
};
using DevicePtr = std::unique_ptr<void, DeviceFree>;
using Stream = std::unique_ptr<CUstream_st, StreamDestroy>;
using Event = std::unique_ptr<CUevent_st, EventDestroy>;

DevicePtr deviceAlloc(size_t bytes) {
  void* p = nullptr;
  CUDA_OK(cudaMalloc(&p, bytes));
  return DevicePtr(p);
}
Stream makeStream() {
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return Stream(s);
}
Event makeEvent() {
  cudaEvent_t e = nullptr;
  CUDA_OK(cudaEventCreate(&e));
  return Event(e);
}

// Values in [-1, 1) from a hash: random-looking data, since tensor cores run
// faster on zeros than on real numbers.
__global__ void fillRandom(__nv_bfloat16* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = __float2bfloat16((h & 0xffff) / 32768.0f - 1.0f);
  }
}

// One GPU's GEMM: buffers, stream, cuBLAS handle and timing events, all made
// on `device`; every method makes that device current first (threads move).
class Gemm {
 public:
  Gemm(int m, int device) : m_(m), device_(device) {
    CUDA_OK(cudaSetDevice(device));
    const size_t n = size_t{static_cast<size_t>(m)} * m;
    a_ = deviceAlloc(n * sizeof(__nv_bfloat16));
    b_ = deviceAlloc(n * sizeof(__nv_bfloat16));
    c_ = deviceAlloc(n * sizeof(__nv_bfloat16));
    stream_ = makeStream();
    fillRandom<<<1024, 256, 0, stream_.get()>>>(static_cast<__nv_bfloat16*>(a_.get()), n, 1);
    fillRandom<<<1024, 256, 0, stream_.get()>>>(static_cast<__nv_bfloat16*>(b_.get()), n, 2);
    CUDA_OK(cudaGetLastError());
    cublasHandle_t h = nullptr;
    CUBLAS_OK(cublasCreate(&h));
    handle_.reset(h);
    CUBLAS_OK(cublasSetStream(h, stream_.get()));
    start_ = makeEvent();
    end_ = makeEvent();
  }
  ~Gemm() { cudaSetDevice(device_); }  // members are freed on their own device
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  int device() const { return device_; }

  // Seconds for `count` GEMMs back to back, by CUDA events on the GEMM stream.
  double time(int count) {
    CUDA_OK(cudaSetDevice(device_));
    const float alpha = 1.0f, beta = 0.0f;
    CUDA_OK(cudaEventRecord(start_.get(), stream_.get()));
    for (int i = 0; i < count; ++i) {
      CUBLAS_OK(cublasGemmEx(handle_.get(), CUBLAS_OP_N, CUBLAS_OP_N, m_, m_, m_, &alpha, a_.get(),
                             CUDA_R_16BF, m_, b_.get(), CUDA_R_16BF, m_, &beta, c_.get(),
                             CUDA_R_16BF, m_, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
    CUDA_OK(cudaEventRecord(end_.get(), stream_.get()));
    CUDA_OK(cudaEventSynchronize(end_.get()));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, start_.get(), end_.get()));
    return ms * 1e-3;
  }

  double tflops(int count, double seconds) const {
    return 2.0 * m_ * static_cast<double>(m_) * m_ * count / seconds / 1e12;
  }

 private:
  int m_;
  int device_;
  DevicePtr a_, b_, c_;
  Stream stream_;
  std::unique_ptr<cublasContext, CublasDestroy> handle_;
  Event start_, end_;
};

using Gemms = std::vector<std::unique_ptr<Gemm>>;

// Runs fn(g) for every GEMM at once, one thread each, and waits for all.
template <typename Fn>
void onEveryGpu(const Gemms& gemms, Fn fn) {
  std::vector<std::thread> threads;
  for (size_t g = 0; g < gemms.size(); ++g) threads.emplace_back([&fn, g] { fn(g); });
  for (auto& t : threads) t.join();
}

// The rank threads' meeting point: every rank brings a value and all leave
// with the largest (the slowest rank's time), or the tool stops after 300 s.
class HostMax {
 public:
  explicit HostMax(int n) : n_(n) {}
  double operator()(double v, const char* where) {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t generation = generation_;
    max_ = arrived_ == 0 ? v : std::max(max_, v);
    if (++arrived_ == n_) {
      arrived_ = 0;
      result_ = max_;
      ++generation_;
      cv_.notify_all();
      return result_;
    }
    if (!cv_.wait_for(lock, std::chrono::seconds(300), [&] { return generation_ != generation; }))
      die(std::string("a rank waited 300 s for its peers at '") + where +
          "': a peer is stuck in the library or in CUDA; rerun with LANES_DEBUG=INFO or "
          "NCCL_DEBUG=INFO to see where.");
    return result_;  // stable: the next round cannot finish without this thread
  }

 private:
  const int n_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  double max_ = 0, result_ = 0;
};

// What the rank threads and the main thread share during one backend's run.
struct Shared {
  explicit Shared(int n) : hostMax(n), streams(n, nullptr) {}
  HostMax hostMax;
  std::atomic<int> enqueued{0};         // ranks whose concurrent all-reduces are queued
  std::atomic<bool> gemmDone{false};    // the GEMM threads have looked at the streams
  std::vector<cudaStream_t> streams;    // each rank's stream, for the coverage check
  double soloSecondsPerCall = 0;        // all-reduce alone, the slowest rank
  double concurrentSecondsPerCall = 0;  // all-reduce while the GEMMs ran
  int concurrentCalls = 0;
};

// One rank: join the communicator, allocate, time the all-reduce alone, then
// queue enough calls to outlast the GEMM window (every rank computes the same
// count from the slowest rank's time) and wait.
void rankMain(Collective* coll, int rank, int device, const Options& o, double window, Shared* sh) {
  CUDA_OK(cudaSetDevice(device));
  std::unique_ptr<lanes_overlap::RankComm> comm;
  std::string err = coll->initRank(rank, &comm);
  if (!err.empty()) die(std::string(coll->name()) + " rank " + std::to_string(rank) + ": " + err);
  const size_t count = o.bytes / sizeof(float);
  DevicePtr send = deviceAlloc(o.bytes), recv = deviceAlloc(o.bytes);
  Stream stream = makeStream();
  sh->streams[rank] = stream.get();
  CUDA_OK(cudaMemsetAsync(send.get(), 0, o.bytes, stream.get()));
  CUDA_OK(cudaMemsetAsync(recv.get(), 0, o.bytes, stream.get()));
  CUDA_OK(cudaStreamSynchronize(stream.get()));
  sh->hostMax(0, "allocation");  // every rank allocated before the first collective
  // `queued` runs once `headStart` calls are enqueued. CUDA blocks a launch
  // once about a thousand wait on a stream, so a long queue is still being
  // enqueued while the GEMMs run; the GPU's queue stays full all the same.
  auto run = [&](int calls, int headStart, auto queued) {
    sh->hostMax(0, "start of a timed loop");
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) {
      std::string e = comm->allReduceSum(send.get(), recv.get(), count, stream.get());
      if (!e.empty()) die(std::string(coll->name()) + " rank " + std::to_string(rank) + ": " + e);
      if (i + 1 == headStart) queued();
    }
    return t0;
  };
  auto nothing = [] {};
  auto finish = [&](std::chrono::steady_clock::time_point t0, int calls) {
    CUDA_OK(cudaStreamSynchronize(stream.get()));
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls;
  };
  finish(run(3, 0, nothing), 3);  // warm-up (sets the path up)
  const double solo = sh->hostMax(finish(run(5, 0, nothing), 5), "all-reduce alone");
  // Queued work must outlast: the main thread's 0.2 s head start, the GEMM
  // window slowed by up to --queue times, and a margin.
  const int calls = static_cast<int>(std::ceil((0.2 + o.queue * window + 0.5) / solo));
  auto t0 = run(calls, std::min(calls, 64), [sh] { sh->enqueued.fetch_add(1); });
  // The stream must outlive the GEMM threads' look at it after their GEMMs.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(600);
  while (!sh->gemmDone.load()) {
    if (std::chrono::steady_clock::now() > deadline) die("the GEMM threads never finished");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const double concurrent = sh->hostMax(finish(t0, calls), "all-reduce with GEMM");
  sh->hostMax(0, "end");  // nobody frees while a peer's collective may still run
  comm.reset();           // NCCL: each rank destroys its own communicator
  if (rank == 0) {
    sh->soloSecondsPerCall = solo;
    sh->concurrentSecondsPerCall = concurrent;
    sh->concurrentCalls = calls;
  }
}

// One backend from solo GEMM to the coverage check; one row per GEMM GPU.
Run runBackend(Collective* coll, const Gemms& gemms, const std::vector<int>& rankDevices,
               const Options& o) {
  Run run;
  run.backend = coll->name();
  run.rows.resize(gemms.size());
  // 1. The GEMMs alone, on every GPU at once (same power and clocks as in 3).
  std::vector<int> counts(gemms.size());
  onEveryGpu(gemms, [&](size_t g) {
    gemms[g]->time(3);  // warm-up (cuBLAS picks its kernel, clocks rise)
    const double once = gemms[g]->time(3) / 3;
    counts[g] = std::max(3, static_cast<int>(o.seconds / once));
    run.rows[g].gpu = gemms[g]->device();
    run.rows[g].gemms = counts[g];
    run.rows[g].soloSeconds = gemms[g]->time(counts[g]);
    run.rows[g].solo = gemms[g]->tflops(counts[g], run.rows[g].soloSeconds);
  });
  double window = 0;
  for (const GpuRow& r : run.rows) window = std::max(window, r.soloSeconds);

  // 2 and 3. The ranks queue their all-reduces; the GEMMs run once they are in flight.
  std::string err = coll->start();
  if (!err.empty()) die(err);
  const int nranks = static_cast<int>(rankDevices.size());
  Shared sh(nranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r)
    threads.emplace_back(rankMain, coll, r, rankDevices[r], std::cref(o), window, &sh);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (sh.enqueued.load() < nranks) {
    if (std::chrono::steady_clock::now() > deadline)
      die(std::string(coll->name()) + ": the all-reduce ranks did not start their calls in 120 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // all-reduces in flight
  onEveryGpu(gemms, [&](size_t g) {
    GpuRow& row = run.rows[g];
    row.concurrentSeconds = gemms[g]->time(counts[g]);
    row.concurrent = gemms[g]->tflops(counts[g], row.concurrentSeconds);
    // Covered: every rank on this GPU still had all-reduces running.
    for (int r = 0; r < nranks; ++r) {
      if (rankDevices[r] != row.gpu) continue;
      cudaError_t q = cudaStreamQuery(sh.streams[r]);
      if (q == cudaSuccess) row.covered = false;
      if (q != cudaSuccess && q != cudaErrorNotReady) cudaOk(q, "cudaStreamQuery");
    }
  });
  sh.gemmDone.store(true);
  for (auto& t : threads) t.join();
  coll->stop();
  run.ranks = nranks;
  run.arSoloSeconds = sh.soloSecondsPerCall;
  run.arConcurrentSeconds = sh.concurrentSecondsPerCall;
  run.arCalls = sh.concurrentCalls;
  return run;
}

// LANES_*, NCCL_* and the CUDA variables that change the path, as NAME=value.
std::string pathEnvironment() {
  std::string out;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    if (kv.rfind("LANES_", 0) == 0 || kv.rfind("NCCL_", 0) == 0 ||
        kv.rfind("CUDA_VISIBLE_DEVICES=", 0) == 0 ||
        kv.rfind("CUDA_DEVICE_MAX_CONNECTIONS=", 0) == 0)
      out += (out.empty() ? "" : " ") + kv;
  }
  return out.empty() ? "(none set)" : out;
}

}  // namespace

int main(int argc, char** argv) {
  // Before any CUDA call: several ranks' streams on one GPU need more hardware
  // queues than CUDA's default 8 (docs/gpu_data_path.md).
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  // The figure is about the host-staged path (copy engines over PCIe): ranks
  // of this process on one GPU would otherwise take P2P slots in GPU memory
  // (session 4: 1.06 ms per 256 MiB instead of ~13 ms). LANES_P2P_DISABLE=0
  // measures P2P instead; the header prints the variable either way.
  setenv("LANES_P2P_DISABLE", "1", 0);
  setvbuf(stdout, nullptr, _IOLBF, 0);
  Options o;
  std::string err = lanes_overlap::parseOptions(argc, argv, &o);
  if (err == "help") {
    std::fputs(lanes_overlap::usage(), stdout);
    return 0;
  }
  if (!err.empty()) {
    std::fprintf(stderr, "lanes_overlap_gemm: %s (--help lists the flags)\n", err.c_str());
    return 2;
  }

  std::vector<int> gemmDevices, rankDevices;
  if (o.gpus > 0) {
    for (int g = 0; g < o.gpus; ++g) gemmDevices.push_back(g);
    rankDevices = gemmDevices;
  } else {
    gemmDevices.assign(1, o.gpu);
    rankDevices.assign(o.ranks, o.gpu);
  }

  // Load every library first (no GPU needed), so a missing NCCL fails before any measuring.
  std::vector<std::unique_ptr<Collective>> colls;
  for (const std::string& b : o.backends()) {
    colls.emplace_back();
    err = lanes_overlap::openCollective(b, rankDevices, &colls.back());
    if (!err.empty()) {
      std::fprintf(stderr, "lanes_overlap_gemm: %s\n", err.c_str());
      return 2;
    }
  }

  int visible = 0;
  cudaError_t e = cudaGetDeviceCount(&visible);
  if (e != cudaSuccess || visible == 0) {
    std::fprintf(stderr,
                 "lanes_overlap_gemm: no CUDA device is visible (cudaGetDeviceCount: %s); this "
                 "tool needs GPUs.\n",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 2;
  }
  const int need = o.gpus > 0 ? o.gpus : o.gpu + 1;
  if (need > visible) {
    std::fprintf(
        stderr, "lanes_overlap_gemm: %s needs GPU %d, but only %d CUDA device%s visible.\n",
        o.gpus > 0 ? "--gpus" : "--gpu", need - 1, visible, visible == 1 ? " is" : "s are");
    return 2;
  }
  std::string gpuNames;
  for (int g : gemmDevices) {
    cudaDeviceProp prop{};
    CUDA_OK(cudaGetDeviceProperties(&prop, g));
    gpuNames += (gpuNames.empty() ? "" : ", ") + std::to_string(g) + ": " + prop.name;
  }
  std::string backends;
  for (const auto& c : colls) backends += (backends.empty() ? "" : " vs ") + std::string(c->name());
  std::printf(
      "# lanes_overlap_gemm: backend %s; %zu GPU%s (%s), %s; bf16 GEMM %d^3 (fp32 accumulate, "
      "cuBLAS tensor ops) looped ~%.1f s on every GPU; all-reduce %zu MiB float32 sum\n",
      backends.c_str(), gemmDevices.size(), gemmDevices.size() == 1 ? "" : "s", gpuNames.c_str(),
      o.gpus > 0 ? "one rank per GPU"
                 : (std::to_string(o.ranks) + " thread ranks on that one GPU").c_str(),
      o.m, o.seconds, o.bytes >> 20);
  for (const auto& c : colls) std::printf("# %s: %s\n", c->name(), c->describe().c_str());
  std::printf("# env: %s\n", pathEnvironment().c_str());

  Gemms gemms;
  for (int g : gemmDevices) gemms.push_back(std::make_unique<Gemm>(o.m, g));
  std::vector<Run> runs;
  for (const auto& c : colls) {
    runs.push_back(runBackend(c.get(), gemms, rankDevices, o));
    lanes_overlap::printRun(runs.back(), o);
  }
  if (runs.size() > 1) lanes_overlap::printComparison(runs);
  if (o.gpus == 0)
    std::printf(
        "# NCCL refuses two ranks on one GPU ('Duplicate GPU detected'); compare with --gpus N "
        "--compare nccl.\n");
  if (!o.json.empty()) {
    err = lanes_overlap::writeJson(o.json, runs, o);
    if (!err.empty()) die(err);
  }
  for (const Run& r : runs) {
    for (const GpuRow& row : r.rows) {
      if (row.covered) continue;
      std::fprintf(stderr,
                   "lanes_overlap_gemm: %s on GPU %d: the all-reduces ended before the GEMMs "
                   "(all-reduce slowed more than --queue %.1f allows); the fraction overstates. "
                   "Rerun with a larger --queue.\n",
                   r.backend.c_str(), row.gpu, o.queue);
      return 3;
    }
  }
  return 0;
}
