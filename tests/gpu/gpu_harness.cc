#include "tests/gpu/gpu_harness.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>

#include "tests/gpu/gpu_kernels.h"

namespace lanes::test {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Ranks of the GPU tests fail on the library's timeout (30 s unless the user
// set LANES_TIMEOUT) well before the watchdog. Runs before every ordinary
// static initialiser, so tests/multi/harness.cc's default (20 s) does not win.
__attribute__((constructor(101))) void setGpuTimeoutDefault() { setenv("LANES_TIMEOUT", "30", 0); }

std::atomic<bool> g_cudaUsed{false};

// Rank of the calling thread in runGpuThreads, -1 elsewhere.
thread_local int t_threadRank = -1;

struct GpuRankFailure {
  std::string message;
};

SteadyClock::time_point deadlineAfter(double seconds) {
  return SteadyClock::now() +
         std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(seconds));
}

// Stream-ordered frees must not hand memory back to the OS at each sync:
// trimming the pool is not guaranteed to be free of device-wide waits.
void keepPoolMemory(int device) {
  cudaMemPool_t pool = nullptr;
  if (cudaDeviceGetDefaultMemPool(&pool, device) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  uint64_t keep = std::numeric_limits<uint64_t>::max();
  if (cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) != cudaSuccess)
    cudaGetLastError();
}

// All thread ranks meet here before their communicators are destroyed; a
// rank that never comes (hung) is waited for only until the deadline.
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  bool arriveAndWait(double seconds) {
    std::unique_lock<std::mutex> lock(mu_);
    if (++arrived_ == n_) cv_.notify_all();
    return cv_.wait_until(lock, deadlineAfter(seconds), [&] { return arrived_ >= n_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_;
  int arrived_ = 0;
};

}  // namespace

int gpusVisibleHere() {
  static const int count = [] {
    g_cudaUsed = true;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

int gpusVisibleFromChild() {
  static const int count = [] {
    std::fflush(stdout);
    std::fflush(stderr);
    pid_t pid = ::fork();
    if (pid < 0) {
      std::fprintf(stderr, "gpusVisibleFromChild: fork: %s\n", std::strerror(errno));
      return 0;
    }
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      int n = 0;
      if (cudaGetDeviceCount(&n) != cudaSuccess) _exit(0);
      _exit(std::min(n, 100));
    }
    auto deadline = deadlineAfter(60);
    for (;;) {
      int status = 0;
      pid_t got = ::waitpid(pid, &status, WNOHANG);
      if (got == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 0;
      if (SteadyClock::now() > deadline) {
        std::fprintf(stderr, "gpusVisibleFromChild: the probe did not finish in 60 s\n");
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        return 0;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }();
  return count;
}

bool cudaInitialisedHere() { return g_cudaUsed.load(); }

void gpuRankFail(const char* file, int line, const std::string& message) {
  if (t_threadRank >= 0) {
    const char* base = std::strrchr(file, '/');
    throw GpuRankFailure{strprintf("%s:%d: %s", base ? base + 1 : file, line, message.c_str())};
  }
  rankFail(file, line, message);  // forked rank: report over the pipe and exit
}

double streamWaitSeconds() { return rankTimeoutSeconds() + 30.0; }

void syncStream(cudaStream_t stream, double seconds) {
  auto deadline = deadlineAfter(seconds);
  auto sleep = std::chrono::microseconds(5);
  for (;;) {
    cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady)
      gpuRankFail(
          __FILE__, __LINE__,
          strprintf("cudaStreamQuery reports %s: the stream's work failed", cudaGetErrorString(e)));
    if (SteadyClock::now() > deadline)
      gpuRankFail(__FILE__, __LINE__,
                  strprintf("the stream had not finished its work after %.0f s (a collective "
                            "enqueued on it never completed)",
                            seconds));
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, std::chrono::microseconds(1000));
  }
}

void expectTimeoutNaming(const GpuRank& self, const char* phrase) {
  syncStream(self.stream, 60);
  // The kernel leaves its error in the control block; the library's monitor
  // (every 50 ms) makes it the communicator's.
  lanesResult_t async = lanesSuccess;
  for (int i = 0; i < 100 && async == lanesSuccess; ++i) {
    GPU_CHECK_LANES(lanesCommGetAsyncError(self.comm, &async), self.comm);
    if (async == lanesSuccess) usleep(20 * 1000);
  }
  const std::string why = lanesGetLastError(self.comm);
  GPU_CHECK(async == lanesTimeout, "async error %d, expected lanesTimeout: %s",
            static_cast<int>(async), why.c_str());
  GPU_CHECK(why.find(phrase) != std::string::npos, "the error does not say \"%s\": %s", phrase,
            why.c_str());
}

std::vector<std::pair<lanesDataType_t, Reduction>> reductionCases() {
  std::vector<std::pair<lanesDataType_t, Reduction>> cases;
  for (lanesDataType_t t : kAllTypes) cases.push_back({t, Reduction::Sum});
  for (lanesDataType_t t : {lanesFloat32, lanesBfloat16, lanesInt32, lanesFloat8e4m3, lanesFloat64,
                            lanesUint8, lanesFloat16})
    for (Reduction r : {Reduction::Max, Reduction::Avg, Reduction::PreMulSum})
      cases.push_back({t, r});
  for (lanesDataType_t t : {lanesFloat32, lanesInt64})
    for (Reduction r : {Reduction::Prod, Reduction::Min}) cases.push_back({t, r});
  return cases;
}

int rankGpu(int rank) {
  const char* spread = std::getenv("LANES_TEST_SPREAD_GPUS");
  if (spread == nullptr || std::strcmp(spread, "1") != 0) return 0;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
    cudaGetLastError();
    return 0;
  }
  return rank % n;
}

std::vector<lanesComm_t> initThreadRanks(int nranks, double timeoutSeconds) {
  std::vector<lanesComm_t> comms(static_cast<size_t>(nranks), nullptr);
  lanesUniqueId id;
  if (lanesGetUniqueId(&id) != lanesSuccess) return comms;
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r)
    threads.emplace_back([&, r] {
      cudaSetDevice(0);
      lanesConfig_t config = LANES_CONFIG_INITIALIZER;
      config.timeoutSeconds = timeoutSeconds;
      lanesCommInitRankConfig(&comms[static_cast<size_t>(r)], nranks, id, r, &config);
    });
  for (auto& t : threads) t.join();
  return comms;
}

void runGpuThreads(int nranks, const GpuBody& body) {
  ASSERT_GT(gpusVisibleHere(), 0);
  std::vector<std::string> before = listLanesShm();
  std::vector<int> devlist(nranks, 0);
  for (int r = 0; r < nranks; ++r) devlist[r] = rankGpu(r);
  for (int r = 0; r < nranks; ++r) {  // each GPU in use: pool and test kernels ready
    if (r > 0 && devlist[r] <= devlist[r - 1]) continue;
    ASSERT_EQ(cudaSetDevice(devlist[r]), cudaSuccess);
    keepPoolMemory(devlist[r]);
    ASSERT_EQ(preloadTestKernels(), cudaSuccess);
  }
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  // Each rank's staging exists before any rank runs a collective (see HostStaging).
  std::vector<std::unique_ptr<HostStaging>> stagings;
  for (int r = 0; r < nranks; ++r) stagings.push_back(std::make_unique<HostStaging>());
  std::vector<lanesComm_t> comms(nranks, nullptr);
  lanesResult_t res = lanesCommInitAll(comms.data(), nranks, devlist.data());
  ASSERT_EQ(res, lanesSuccess) << describeFailure("lanesCommInitAll", res, nullptr);

  Barrier beforeDestroy(nranks);
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  std::vector<std::string> failures(nranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      t_threadRank = r;
      HostStaging::setMine(stagings[r].get());
      std::string failure;
      cudaStream_t stream = nullptr;
      try {
        GPU_CHECK_CUDA(cudaSetDevice(devlist[r]));
        GPU_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        GpuRank self{r, nranks, comms[r], stream, false};
        body(self);
        syncStream(stream);
      } catch (const GpuRankFailure& f) {
        failure = f.message;
      } catch (const std::exception& e) {
        failure = strprintf("exception: %s", e.what());
      }
      if (!beforeDestroy.arriveAndWait(streamWaitSeconds()) && failure.empty())
        failure = "a peer rank never reached the end of the test body";
      // Destroying the communicator also lets go of a stream parked on it.
      lanesResult_t d = lanesCommDestroy(comms[r]);
      if (d != lanesSuccess && failure.empty())
        failure = describeFailure("lanesCommDestroy", d, nullptr);
      if (stream != nullptr) cudaStreamDestroy(stream);
      t_threadRank = -1;
      HostStaging::setMine(nullptr);
      std::lock_guard<std::mutex> lock(mu);
      failures[r] = failure;
      ++finished;
      cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    const double watchdog = watchdogSeconds();
    if (!cv.wait_until(lock, deadlineAfter(watchdog), [&] { return finished == nranks; })) {
      std::fprintf(stderr,
                   "watchdog: %d of %d GPU thread ranks had not finished after %.0f s "
                   "(LANES_TEST_WATCHDOG); a hung thread cannot be recovered, aborting\n",
                   nranks - finished, nranks, watchdog);
      std::abort();
    }
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < nranks; ++r)
    if (!failures[r].empty()) ADD_FAILURE() << "rank " << r << " (thread): " << failures[r];
  expectNoShmLeaks(before, "the threaded GPU run");
}

void runGpuProcesses(int nranks, const GpuBody& body) {
  ASSERT_FALSE(cudaInitialisedHere()) << "the parent of forked GPU ranks must not use CUDA";
  runForked(nranks, [&body](int rank, int n, const lanesUniqueId& id) {
    // The GPU becomes current before init, so the communicator takes it.
    const int gpu = rankGpu(rank);
    GPU_CHECK_CUDA(cudaSetDevice(gpu));
    keepPoolMemory(gpu);
    cudaStream_t stream = nullptr;
    GPU_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    HostStaging::mine();  // before the communicator runs anything
    GPU_CHECK_CUDA(preloadTestKernels());
    CommGuard comm(initComm(rank, n, id));
    GpuRank self{rank, n, comm.get(), stream, true};
    body(self);
    syncStream(stream);
  });
}

DeviceBuffer::DeviceBuffer(size_t bytes, cudaStream_t stream) : bytes_(bytes), stream_(stream) {
  void* p = nullptr;
  GPU_CHECK_CUDA(cudaMallocAsync(&p, bytes + 2 * kGuard, stream));
  base_ = static_cast<std::byte*>(p);
  GPU_CHECK_CUDA(cudaMemsetAsync(base_, kSentinel, bytes + 2 * kGuard, stream));
}

DeviceBuffer::~DeviceBuffer() {
  if (base_ != nullptr) cudaFreeAsync(base_, stream_);
}

void DeviceBuffer::upload(const void* host, size_t bytes, size_t offset) {
  GPU_CHECK(offset + bytes <= bytes_, "upload of %zu bytes at %zu into a %zu-byte buffer", bytes,
            offset, bytes_);
  GPU_CHECK_CUDA(copyIn(data() + offset, host, bytes, stream_));
}

void DeviceBuffer::fill(uint8_t value) {
  if (bytes_ > 0) GPU_CHECK_CUDA(cudaMemsetAsync(data(), value, bytes_, stream_));
}

std::vector<std::byte> DeviceBuffer::download(std::string* guardProblem) const {
  std::vector<std::byte> all(bytes_ + 2 * kGuard);
  GPU_CHECK_CUDA(copyOut(all.data(), base_, all.size(), stream_));
  if (guardProblem != nullptr) {
    guardProblem->clear();
    for (size_t i = 0; i < kGuard && guardProblem->empty(); ++i) {
      if (all[i] != std::byte{kSentinel})
        *guardProblem = strprintf("device write %zu bytes before the buffer start", kGuard - i);
      else if (all[kGuard + bytes_ + i] != std::byte{kSentinel})
        *guardProblem = strprintf("device write %zu bytes past the buffer end", i);
    }
  }
  return std::vector<std::byte>(all.begin() + kGuard, all.begin() + kGuard + bytes_);
}

namespace {
constexpr unsigned long long kGateLimitNs = 20ull * 1000 * 1000 * 1000;
thread_local HostStaging* t_staging = nullptr;
thread_local std::unique_ptr<HostStaging> t_ownStaging;
}  // namespace

HostStaging::HostStaging() {
  void* p = nullptr;
  GPU_CHECK_CUDA(cudaHostAlloc(&p, kChunk + kFlagWords * sizeof(int),
                               cudaHostAllocPortable | cudaHostAllocMapped));
  chunk_ = static_cast<std::byte*>(p);
  flags_ = reinterpret_cast<int*>(chunk_ + kChunk);
  std::memset(flags_, 0, kFlagWords * sizeof(int));
  void* d = nullptr;
  GPU_CHECK_CUDA(cudaHostGetDevicePointer(&d, flags_, 0));
  deviceFlags_ = static_cast<int*>(d);
}

HostStaging::~HostStaging() {
  if (chunk_ != nullptr) cudaFreeHost(chunk_);
}

int* HostStaging::takeFlag(int** deviceAddress) {
  GPU_CHECK(nextFlag_ < kFlagWords, "more than %d gate flags in one rank", kFlagWords);
  const int i = nextFlag_++;
  flags_[i] = 0;
  *deviceAddress = deviceFlags_ + i;
  return flags_ + i;
}

HostStaging& HostStaging::mine() {
  if (t_staging == nullptr) {
    t_ownStaging = std::make_unique<HostStaging>();
    t_staging = t_ownStaging.get();
  }
  return *t_staging;
}

void HostStaging::setMine(HostStaging* staging) { t_staging = staging; }

cudaError_t copyIn(void* device, const void* host, size_t bytes, cudaStream_t stream) {
  HostStaging& staging = HostStaging::mine();
  for (size_t done = 0; done < bytes; done += HostStaging::kChunk) {
    const size_t n = std::min(HostStaging::kChunk, bytes - done);
    syncStream(stream);  // the chunk is free again
    std::memcpy(staging.chunk(), static_cast<const std::byte*>(host) + done, n);
    cudaError_t e = cudaMemcpyAsync(static_cast<std::byte*>(device) + done, staging.chunk(), n,
                                    cudaMemcpyHostToDevice, stream);
    if (e != cudaSuccess) return e;
  }
  syncStream(stream);
  return cudaSuccess;
}

cudaError_t copyOut(void* host, const void* device, size_t bytes, cudaStream_t stream) {
  HostStaging& staging = HostStaging::mine();
  for (size_t done = 0; done < bytes; done += HostStaging::kChunk) {
    const size_t n = std::min(HostStaging::kChunk, bytes - done);
    cudaError_t e = cudaMemcpyAsync(staging.chunk(), static_cast<const std::byte*>(device) + done,
                                    n, cudaMemcpyDeviceToHost, stream);
    if (e != cudaSuccess) return e;
    syncStream(stream);
    std::memcpy(static_cast<std::byte*>(host) + done, staging.chunk(), n);
  }
  return cudaSuccess;
}

Gate::Gate(cudaStream_t gated) : gated_(gated) {
  HostStaging& staging = HostStaging::mine();
  open_ = staging.takeFlag(&openDevice_);
  timedOut_ = staging.takeFlag(&timedOutDevice_);
}

void Gate::close() {
  __atomic_store_n(open_, 0, __ATOMIC_RELEASE);
  __atomic_store_n(timedOut_, 0, __ATOMIC_RELEASE);
  GPU_CHECK_CUDA(launchGate(gated_, openDevice_, timedOutDevice_, kGateLimitNs));
}

void Gate::open() { __atomic_store_n(open_, 1, __ATOMIC_RELEASE); }

bool Gate::timedOut() const {
  syncStream(gated_);
  return __atomic_load_n(timedOut_, __ATOMIC_ACQUIRE) != 0;
}

}  // namespace lanes::test
