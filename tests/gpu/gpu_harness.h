// GPU test harness: runs one body on N ranks that share GPU 0, either as
// threads of this process (one lanesCommInitAll) or as forked processes, each
// rank with its own non-blocking stream, under a watchdog; and small helpers
// for device buffers whose waits are all bounded.
//
// Rules it enforces for the bodies:
// - Thread ranks never use the legacy default stream, and never call CUDA
//   functions that synchronise the whole device (cudaFree, cudaFreeHost,
//   cudaMemcpy, cudaDeviceSynchronize) while collectives are in flight: a rank
//   blocked there would wait for a peer's stream that waits for this rank.
//   DeviceBuffer allocates stream-ordered (cudaMallocAsync) for that reason.
// - A process that forks ranks must not have initialised CUDA (a forked child
//   cannot use a CUDA context of its parent): the GPU count for a forked test
//   is taken in a short-lived child, and the parent makes no CUDA call.
//
// Inside a rank body use GPU_CHECK / GPU_CHECK_LANES / GPU_CHECK_CUDA: they
// throw in a thread rank and report over the pipe and _exit in a forked one.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "lanes/lanes.h"
#include "tests/multi/data.h"
#include "tests/multi/harness.h"

namespace lanes::test {

// ---- Is there a GPU? ------------------------------------------------------

// GPUs visible to this process, counted here (this initialises CUDA in this
// process: tests that fork ranks must use gpusVisibleFromChild instead).
int gpusVisibleHere();
// GPUs visible, counted in a short-lived child process; this process stays
// free of CUDA so that it can still fork ranks that use the GPU.
int gpusVisibleFromChild();
// Whether this process has already called into CUDA (through the helpers above).
bool cudaInitialisedHere();

inline constexpr const char* kNoGpu = "no CUDA device visible";

// For tests whose ranks (or checks) run in this process.
#define GPU_SKIP_UNLESS_GPU_HERE()                                                    \
  do {                                                                                \
    if (::lanes::test::gpusVisibleHere() <= 0) GTEST_SKIP() << ::lanes::test::kNoGpu; \
  } while (0)

// For tests that fork ranks: this process must not have touched CUDA.
#define GPU_SKIP_UNLESS_GPU_FOR_FORK()                                                        \
  do {                                                                                        \
    if (::lanes::test::cudaInitialisedHere()) {                                               \
      if (::lanes::test::gpusVisibleHere() <= 0) GTEST_SKIP() << ::lanes::test::kNoGpu;       \
      GTEST_SKIP() << "CUDA was already initialised in this process by an earlier test, so "  \
                      "forked ranks could not use the GPU; run this test in its own process " \
                      "(ctest does)";                                                         \
    }                                                                                         \
    if (::lanes::test::gpusVisibleFromChild() <= 0) GTEST_SKIP() << ::lanes::test::kNoGpu;    \
  } while (0)

// ---- Failing a rank -------------------------------------------------------

// Fails the calling rank: throws in a thread rank of runGpuThreads, reports
// and exits in a forked rank (tests/multi/harness.h rankFail).
[[noreturn]] void gpuRankFail(const char* file, int line, const std::string& message);

#define GPU_CHECK(cond, ...)                                                    \
  do {                                                                          \
    if (!(cond))                                                                \
      ::lanes::test::gpuRankFail(                                               \
          __FILE__, __LINE__,                                                   \
          "check failed: " #cond ": " + ::lanes::test::strprintf(__VA_ARGS__)); \
  } while (0)

#define GPU_CHECK_LANES(expr, comm)                                                              \
  do {                                                                                           \
    lanesResult_t gpu_check_res_ = (expr);                                                       \
    if (gpu_check_res_ != lanesSuccess)                                                          \
      ::lanes::test::gpuRankFail(__FILE__, __LINE__,                                             \
                                 ::lanes::test::describeFailure(#expr, gpu_check_res_, (comm))); \
  } while (0)

#define GPU_CHECK_CUDA(expr)                                                                     \
  do {                                                                                           \
    cudaError_t gpu_check_err_ = (expr);                                                         \
    if (gpu_check_err_ != cudaSuccess)                                                           \
      ::lanes::test::gpuRankFail(                                                                \
          __FILE__, __LINE__,                                                                    \
          ::lanes::test::strprintf("%s failed: %s", #expr, cudaGetErrorString(gpu_check_err_))); \
  } while (0)

// ---- Running ranks --------------------------------------------------------

struct GpuRank {
  int rank = 0;
  int nranks = 1;
  lanesComm_t comm = nullptr;
  cudaStream_t stream = nullptr;  // non-blocking, created by the harness for this rank
  bool forked = false;
};
using GpuBody = std::function<void(GpuRank& self)>;

// Seconds a rank waits for its stream before it fails: longer than the
// library's own timeout, so a library failure shows as the library's error.
double streamWaitSeconds();

// The GPU of `rank`: 0, or rank % (visible GPUs) with LANES_TEST_SPREAD_GPUS=1
// (one rank per GPU on a multi-GPU machine; the tests that set up ranks
// themselves, tests/gpu/test_staged_collectives.cc, stay on GPU 0).
int rankGpu(int rank);

// N ranks as threads: one lanesCommInitAll over GPU 0 for all of them, then
// one thread per rank (cudaSetDevice(0), own stream). Call after
// GPU_SKIP_UNLESS_GPU_HERE. A hang past the watchdog aborts the binary.
void runGpuThreads(int nranks, const GpuBody& body);
// `nranks` communicators of ranks as threads on GPU 0 with the given
// timeout (lanesCommInitRankConfig on a thread each); a null entry where a
// rank's init failed. For tests that drive the ranks themselves.
std::vector<lanesComm_t> initThreadRanks(int nranks, double timeoutSeconds);
// N ranks as forked processes sharing GPU 0: the id is made here (no CUDA),
// each child sets up CUDA and its communicator itself. Call after
// GPU_SKIP_UNLESS_GPU_FOR_FORK.
void runGpuProcesses(int nranks, const GpuBody& body);

// Waits for all work on `stream`, polling (never longer than `seconds`).
void syncStream(cudaStream_t stream, double seconds = streamWaitSeconds());

// After a call whose peer never came: waits for the stream, then up to 2 s
// for the library's monitor to make the kernel's error the communicator's;
// checks that it is lanesTimeout and that lanesGetLastError contains `phrase`.
void expectTimeoutNaming(const GpuRank& self, const char* phrase);

// The datatype and op pairs the device matrices run: every type with sum,
// and the ops that round differently on a type of each kind.
std::vector<std::pair<lanesDataType_t, Reduction>> reductionCases();

// ---- Host staging ------------------------------------------------------------

// Pinned, mapped host memory of one rank, made before its communicator runs
// anything. Every copy between host and device in the tests goes through it:
// a copy from pageable memory (and a new pinned allocation) can wait for the
// other streams of the process, and with ranks as threads those streams may
// be parked on a collective that waits for this very rank (seen on the H200:
// a 4-byte pageable copy waited 20 s for a peer's gated stream).
class HostStaging {
 public:
  static constexpr size_t kChunk = size_t{32} << 20;
  static constexpr int kFlagWords = 1024;
  HostStaging();
  ~HostStaging();
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;

  std::byte* chunk() const { return chunk_; }
  // A zeroed word of mapped memory, and the device's address of it.
  int* takeFlag(int** deviceAddress);

  // The calling rank's staging (made on first use when the harness did not).
  static HostStaging& mine();
  static void setMine(HostStaging* staging);

 private:
  std::byte* chunk_ = nullptr;
  int* flags_ = nullptr;
  int* deviceFlags_ = nullptr;
  int nextFlag_ = 0;
};

// Host <-> device copies through the rank's staging; both synchronise `stream`.
cudaError_t copyIn(void* device, const void* host, size_t bytes, cudaStream_t stream);
cudaError_t copyOut(void* host, const void* device, size_t bytes, cudaStream_t stream);

// A kernel that holds a stream until the host opens it, which the tests do
// only after their Lanes calls returned: a call that waited for its stream
// leaves the gate to time out (20 s), which the test reports. Its flags are
// mapped host memory, so opening it is a plain store (no CUDA call that
// could itself wait for the gated stream).
class Gate {
 public:
  explicit Gate(cudaStream_t gated);
  // Enqueues the gate on the gated stream, closed.
  void close();
  void open();
  // Synchronises the gated stream; whether the gate gave up waiting.
  bool timedOut() const;

 private:
  cudaStream_t gated_;
  int* open_ = nullptr;
  int* openDevice_ = nullptr;
  int* timedOut_ = nullptr;
  int* timedOutDevice_ = nullptr;
};

// ---- Device memory ----------------------------------------------------------

// A device allocation on `stream` (stream-ordered: no device-wide
// synchronisation) with guard zones on both sides filled with a sentinel.
class DeviceBuffer {
 public:
  DeviceBuffer(size_t bytes, cudaStream_t stream);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  std::byte* data() const { return base_ + kGuard; }
  size_t bytes() const { return bytes_; }
  // Copies host bytes in at `offset` (stream-ordered).
  void upload(const void* host, size_t bytes, size_t offset = 0);
  // Sets every byte of the data area (stream-ordered).
  void fill(uint8_t value);
  // The data area as host bytes; synchronises the stream (bounded). Also
  // checks the guards: "" or what was written outside the data area.
  std::vector<std::byte> download(std::string* guardProblem = nullptr) const;

 private:
  static constexpr size_t kGuard = 256;
  static constexpr uint8_t kSentinel = 0xA5;
  std::byte* base_ = nullptr;
  size_t bytes_ = 0;
  cudaStream_t stream_;
};

}  // namespace lanes::test
