// lanes_overlap_gemm: how much of a large matrix multiply's throughput survives
// while Lanes all-reduces run on the same GPU. Lanes moves bulk bytes with the
// copy engines and uses SMs only for short reduce kernels, so the GEMM should
// keep most of its speed (issue target: >= 90% of solo).
//
//   1. solo: cuBLAS GEMM (bf16 in/out, fp32 accumulate, tensor ops; 8192^3 by
//      default) looped on stream A for about --seconds; TFLOP/s from CUDA events.
//   2. all-reduce alone: --ranks thread ranks on the same GPU, each on its own
//      non-blocking stream, float32 sum of --bytes; time per call.
//   3. concurrent: the ranks enqueue enough all-reduces to outlast the GEMM
//      window, then the same GEMM loop runs again; TFLOP/s, the fraction of
//      solo, and whether the all-reduces really covered the whole window.
//
//   lanes_overlap_gemm [--m 8192] [--seconds 2] [--ranks 2] [--bytes 256M] [--gpu 0]
//
// C API only: nvcc builds this file as C++17.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
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

namespace {

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

struct Options {
  int m = 8192;
  double seconds = 2.0;
  int ranks = 2;
  size_t bytes = size_t{256} << 20;
  int gpu = 0;
};

bool parseOptions(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    char* end = nullptr;
    double d = std::strtod(v, &end);
    if (end == v) return false;
    double unit = 1;
    if (*end == 'K' || *end == 'k') unit = 1024.0, ++end;
    if (*end == 'M' || *end == 'm') unit = 1024.0 * 1024, ++end;
    if (*end == 'G' || *end == 'g') unit = 1024.0 * 1024 * 1024, ++end;
    if (*end != '\0' || d < 0) return false;
    if (f == "--m" && d >= 256 && d <= 65536) {
      o->m = static_cast<int>(d);
    } else if (f == "--seconds" && d > 0 && d <= 60) {
      o->seconds = d;
    } else if (f == "--ranks" && d >= 1 && d <= 8) {
      o->ranks = static_cast<int>(d);
    } else if (f == "--bytes" && d * unit >= 1024) {
      o->bytes = static_cast<size_t>(d * unit) / 16 * 16;
    } else if (f == "--gpu") {
      o->gpu = static_cast<int>(d);
    } else {
      return false;
    }
  }
  return true;
}

class Gemm {
 public:
  explicit Gemm(int m) : m_(m) {
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

  void enqueue() {
    const float alpha = 1.0f, beta = 0.0f;
    CUBLAS_OK(cublasGemmEx(handle_.get(), CUBLAS_OP_N, CUBLAS_OP_N, m_, m_, m_, &alpha, a_.get(),
                           CUDA_R_16BF, m_, b_.get(), CUDA_R_16BF, m_, &beta, c_.get(), CUDA_R_16BF,
                           m_, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

  // Seconds for `count` GEMMs back to back, by CUDA events on the GEMM stream.
  double time(int count) {
    CUDA_OK(cudaEventRecord(start_.get(), stream_.get()));
    for (int i = 0; i < count; ++i) enqueue();
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
  DevicePtr a_, b_, c_;
  Stream stream_;
  std::unique_ptr<cublasContext, CublasDestroy> handle_;
  Event start_, end_;
};

// What the rank threads and the main thread share.
struct Shared {
  std::atomic<int> enqueued{0};         // ranks whose concurrent all-reduces are queued
  std::atomic<bool> gemmDone{false};    // the main thread has looked at the streams
  std::vector<cudaStream_t> streams;    // each rank's stream, for the coverage check
  double soloSecondsPerCall = 0;        // all-reduce alone, the slowest rank
  double concurrentSecondsPerCall = 0;  // all-reduce while the GEMM ran
  int concurrentCalls = 0;
};

double hostMax(lanesComm_t comm, double v) {
  double out = 0;
  if (lanesAllReduce(&v, &out, 1, lanesFloat64, lanesMax, comm, nullptr) != lanesSuccess)
    die(std::string("host all-reduce failed: ") + lanesGetLastError(comm));
  return out;
}

void arOk(lanesResult_t r, lanesComm_t comm) {
  if (r != lanesSuccess) die(std::string("lanesAllReduce failed: ") + lanesGetLastError(comm));
}

// One rank: allocate, time the all-reduce alone, then queue enough calls to
// outlast the GEMM window (both ranks compute the same count) and wait.
void rankMain(lanesComm_t comm, int rank, const Options& o, double window, Shared* sh) {
  CUDA_OK(cudaSetDevice(o.gpu));
  const size_t count = o.bytes / sizeof(float);
  DevicePtr send = deviceAlloc(o.bytes), recv = deviceAlloc(o.bytes);
  Stream stream = makeStream();
  sh->streams[rank] = stream.get();
  CUDA_OK(cudaMemsetAsync(send.get(), 0, o.bytes, stream.get()));
  CUDA_OK(cudaMemsetAsync(recv.get(), 0, o.bytes, stream.get()));
  CUDA_OK(cudaStreamSynchronize(stream.get()));
  hostMax(comm, 0);  // every rank allocated before the first collective
  auto run = [&](int calls) {
    hostMax(comm, 0);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) {
      arOk(
          lanesAllReduce(send.get(), recv.get(), count, lanesFloat32, lanesSum, comm, stream.get()),
          comm);
    }
    return t0;
  };
  auto finish = [&](std::chrono::steady_clock::time_point t0, int calls) {
    CUDA_OK(cudaStreamSynchronize(stream.get()));
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls;
  };
  finish(run(3), 3);  // warm-up (sets the path up)
  const double solo = hostMax(comm, finish(run(5), 5));
  // Queued work must outlast: the main thread's 0.2 s head start, the GEMM
  // window even at half speed, and a margin.
  const int calls = static_cast<int>(std::ceil((0.2 + 2 * window + 0.5) / solo));
  auto t0 = run(calls);
  sh->enqueued.fetch_add(1);
  // The stream must outlive the main thread's look at it after the GEMMs.
  while (!sh->gemmDone.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const double concurrent = hostMax(comm, finish(t0, calls));
  hostMax(comm, 0);  // nobody frees while a peer's collective may still run
  if (rank == 0) {
    sh->soloSecondsPerCall = solo;
    sh->concurrentSecondsPerCall = concurrent;
    sh->concurrentCalls = calls;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Before any CUDA call: several ranks' streams on one GPU need more hardware
  // queues than CUDA's default 8 (docs/gpu_data_path.md).
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  setvbuf(stdout, nullptr, _IOLBF, 0);
  Options o;
  if (!parseOptions(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: lanes_overlap_gemm [--m 8192] [--seconds 2] [--ranks 2] [--bytes 256M] "
                 "[--gpu 0]\n");
    return 2;
  }
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || o.gpu >= gpus) {
    std::fprintf(stderr, "lanes_overlap_gemm: GPU %d is not visible (%d CUDA devices).\n", o.gpu,
                 gpus);
    return 2;
  }
  CUDA_OK(cudaSetDevice(o.gpu));
  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, o.gpu));
  std::printf(
      "# lanes_overlap_gemm on GPU %d (%s): bf16 GEMM %d^3 (fp32 accumulate, cuBLAS "
      "tensor ops) vs %d Lanes thread ranks all-reducing %zu MiB float32 on the same "
      "GPU\n",
      o.gpu, prop.name, o.m, o.ranks, o.bytes >> 20);

  // 1. The GEMM alone.
  Gemm gemm(o.m);
  gemm.time(3);  // warm-up (cuBLAS picks its kernel, clocks rise)
  const double once = gemm.time(3) / 3;
  const int gemms = std::max(3, static_cast<int>(o.seconds / once));
  const double soloSeconds = gemm.time(gemms);
  const double solo = gemm.tflops(gemms, soloSeconds);
  std::printf("solo GEMM:            %8.1f TFLOP/s  (%d GEMMs in %.2f s)\n", solo, gemms,
              soloSeconds);

  // 2 and 3. Ranks on the same GPU; the GEMM runs once their calls are queued.
  std::vector<int> devlist(o.ranks, o.gpu);
  std::vector<lanesComm_t> comms(o.ranks, nullptr);
  if (lanesCommInitAll(comms.data(), o.ranks, devlist.data()) != lanesSuccess)
    die(std::string("lanesCommInitAll failed: ") + lanesGetLastError(nullptr));
  Shared sh;
  sh.streams.assign(o.ranks, nullptr);
  std::vector<std::thread> threads;
  for (int r = 0; r < o.ranks; ++r)
    threads.emplace_back(rankMain, comms[r], r, std::cref(o), soloSeconds, &sh);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (sh.enqueued.load() < o.ranks) {
    if (std::chrono::steady_clock::now() > deadline) die("the all-reduce ranks never started");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // all-reduces in flight
  const double concurrentSeconds = gemm.time(gemms);
  bool covered = true;  // were the all-reduces still running when the GEMMs ended?
  for (cudaStream_t s : sh.streams) {
    cudaError_t q = cudaStreamQuery(s);
    if (q == cudaSuccess) covered = false;
    if (q != cudaSuccess && q != cudaErrorNotReady) cudaOk(q, "cudaStreamQuery");
  }
  sh.gemmDone.store(true);
  for (auto& t : threads) t.join();
  for (lanesComm_t c : comms) lanesCommDestroy(c);

  const double concurrent = gemm.tflops(gemms, concurrentSeconds);
  const double fraction = concurrent / solo;
  const double busFactor = 2.0 * (o.ranks - 1) / o.ranks;
  std::printf("all-reduce alone:     %8.2f ms per call (busbw %.2f GB/s)\n",
              sh.soloSecondsPerCall * 1e3, o.bytes / sh.soloSecondsPerCall / 1e9 * busFactor);
  std::printf("all-reduce with GEMM: %8.2f ms per call (busbw %.2f GB/s, %d calls queued)\n",
              sh.concurrentSecondsPerCall * 1e3,
              o.bytes / sh.concurrentSecondsPerCall / 1e9 * busFactor, sh.concurrentCalls);
  std::printf("concurrent GEMM:      %8.1f TFLOP/s  (%d GEMMs in %.2f s)\n", concurrent, gemms,
              concurrentSeconds);
  std::printf("fraction of solo:     %8.3f  (target >= 0.90: %s)\n", fraction,
              fraction >= 0.9 ? "met" : "NOT met");
  std::printf("all-reduces covered the whole GEMM window: %s\n",
              covered ? "yes" : "NO (raise --seconds margin; the fraction overstates)");
  std::printf(
      "# NCCL cannot be compared here: it refuses two ranks on one GPU "
      "(ncclInvalidUsage, 'Duplicate GPU detected'); Lanes allows it.\n");
  return 0;
}
