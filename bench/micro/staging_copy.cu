// lanes_micro_staging_copy: copy-engine bandwidth into the kinds of host memory the
// host-staged all-reduce (src/exec/cuda/staged_collectives.cc) stages through, and the cost
// of its per-chunk stream-memop handshake. CUDA runtime only; no Lanes internals, so the
// numbers say what the hardware and driver give, not what Lanes makes of them.
//
// Every measurement parks its streams behind a "gate" kernel that spins until one shared
// release time, so all copies are enqueued before any starts and concurrent streams start
// together; a row marked '*' was still being enqueued when the gate opened (the host may
// have fed the copies slower than they ran). GB/s = 1e9 B/s, timed with CUDA events.

#include <cuda.h>  // CUresult and CU_STREAM_* values; entry points are fetched at run time
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kGiB = size_t{1} << 30;

// ---- errors -------------------------------------------------------------------------

void check(cudaError_t err, const char* call, int line) {
  if (err == cudaSuccess) return;
  throw std::runtime_error(std::string(call) + " failed (staging_copy.cu:" + std::to_string(line) +
                           "): " + cudaGetErrorName(err) + ", " + cudaGetErrorString(err));
}
#define CK(call) check((call), #call, __LINE__)

std::string errnoText(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// Deleters run in destructors: they cannot throw, so they say what failed and go on.
void warnIf(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    std::fprintf(stderr, "staging_copy: warning: %s failed: %s\n", what, cudaGetErrorName(err));
}

// ---- RAII ---------------------------------------------------------------------------

struct DeviceFree {
  void operator()(void* p) const { warnIf(cudaFree(p), "cudaFree"); }
};
struct HostFree {
  void operator()(void* p) const { warnIf(cudaFreeHost(p), "cudaFreeHost"); }
};
struct Unregister {
  void operator()(void* p) const { warnIf(cudaHostUnregister(p), "cudaHostUnregister"); }
};
struct Munmap {
  size_t bytes = 0;
  void operator()(void* p) const { ::munmap(p, bytes); }
};
struct StreamDestroy {
  void operator()(cudaStream_t s) const { warnIf(cudaStreamDestroy(s), "cudaStreamDestroy"); }
};
struct EventDestroy {
  void operator()(cudaEvent_t e) const { warnIf(cudaEventDestroy(e), "cudaEventDestroy"); }
};
// Owns a file descriptor (shm_open's); closing it leaves the mapping intact.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

using DeviceBuffer = std::unique_ptr<void, DeviceFree>;
using Stream = std::unique_ptr<CUstream_st, StreamDestroy>;
using Event = std::unique_ptr<CUevent_st, EventDestroy>;

DeviceBuffer deviceBuffer(size_t bytes) {
  void* p = nullptr;
  CK(cudaMalloc(&p, bytes));
  DeviceBuffer b(p);
  CK(cudaMemset(p, 0x5a, bytes));
  return b;
}

Stream stream() {
  cudaStream_t s = nullptr;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));  // as staged_collectives.cc
  return Stream(s);
}

Event event() {
  cudaEvent_t e = nullptr;
  CK(cudaEventCreate(&e));
  return Event(e);
}

// ---- host memory kinds --------------------------------------------------------------

std::string readLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "unreadable";
  return line;
}

size_t devShmFreeBytes() {
  struct statvfs vfs {};
  if (::statvfs("/dev/shm", &vfs) != 0) return 0;
  return static_cast<size_t>(vfs.f_bavail) * vfs.f_frsize;
}

// Page sizes behind [p, p+bytes) from /proc/self/smaps: how much of the resident part is
// mapped with 2 MiB pages (anonymous or shmem THP).
std::string pageSummary(const void* p, size_t bytes) {
  std::ifstream smaps("/proc/self/smaps");
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p), hi = lo + bytes;
  size_t rssKiB = 0, hugeKiB = 0;
  bool inside = false;
  std::string line;
  while (std::getline(smaps, line)) {
    uintptr_t a = 0, b = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &a, &b) == 2) {
      inside = a < hi && b > lo;
      continue;
    }
    if (!inside) continue;
    size_t kib = 0;
    char key[64] = {};
    if (std::sscanf(line.c_str(), "%63[^:]: %zu kB", key, &kib) != 2) continue;
    const std::string k = key;
    if (k == "Rss") rssKiB += kib;
    if (k == "AnonHugePages" || k == "ShmemPmdMapped" || k == "FilePmdMapped") hugeKiB += kib;
  }
  if (rssKiB == 0) return "n/a (driver mapping)";
  char text[64];
  std::snprintf(text, sizeof(text), "2M pages %3.0f%%", 100.0 * hugeKiB / rssKiB);
  return text;
}

// NUMA nodes of 16 pages spread over the region (get_mempolicy, no libnuma needed).
std::string numaSummary(const void* p, size_t bytes) {
  constexpr unsigned long kNode = 1, kAddr = 2;  // MPOL_F_NODE, MPOL_F_ADDR
  std::set<int> nodes;
  for (int i = 0; i < 16; ++i) {
    const char* at = static_cast<const char*>(p) + bytes / 16 * i;
    int node = -1;
    if (::syscall(SYS_get_mempolicy, &node, nullptr, 0UL, at, kNode | kAddr) != 0) return "?";
    nodes.insert(node);
  }
  std::string s = "node";
  for (int n : nodes) s += " " + std::to_string(n);
  return s;
}

struct HostRegion {
  std::string label;
  std::unique_ptr<void, Munmap> mapping;         // shm / anonymous kinds
  std::unique_ptr<void, HostFree> allocated;     // cudaHostAlloc kind
  std::unique_ptr<void, Unregister> registered;  // released before the mapping
  char* data = nullptr;
  size_t bytes = 0;
  std::string pages, numa;
  std::string unavailable;  // why this kind could not be set up, else empty

  bool ok() const { return unavailable.empty(); }
  void describe() {
    pages = pageSummary(data, bytes);
    numa = numaSummary(data, bytes);
  }
};

// Same flags as transport/hoststage/host_arena.cc. A refusal (locked-memory limit, say) makes
// that kind unavailable rather than ending the run: the other kinds still answer.
std::string registerLikeArena(HostRegion& r) {
  const cudaError_t err =
      cudaHostRegister(r.data, r.bytes, cudaHostRegisterPortable | cudaHostRegisterMapped);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky; clear it so later calls don't report it
    return std::string("cudaHostRegister: ") + cudaGetErrorName(err) + ", " +
           cudaGetErrorString(err) + " (check ulimit -l)";
  }
  r.registered.reset(r.data);
  return {};
}

HostRegion hostAlloc(size_t bytes) {
  HostRegion r;
  r.label = "(a) cudaHostAlloc";
  void* p = nullptr;
  CK(cudaHostAlloc(&p, bytes, cudaHostAllocDefault));  // what the copy bounds measure
  r.allocated.reset(p);
  r.data = static_cast<char*>(p);
  r.bytes = bytes;
  std::memset(p, 0, bytes);
  r.describe();
  return r;
}

// (b) as transport/shm/shm_segment.cc + arena.cc: shm_open, ftruncate, mmap MAP_SHARED,
// posix_fallocate (pages allocated by tmpfs), cudaHostRegister. (c) instead asks for
// transparent huge pages on the mapping and faults the pages in by touching them:
// fallocate allocates without the mapping's advice, so it would not give 2 MiB pages.
HostRegion sharedMemory(size_t bytes, bool hugeAdvice, int serial) {
  HostRegion r;
  r.label = hugeAdvice ? "(c) shm + MADV_HUGEPAGE" : "(b) shm (as arena.cc)";
  const size_t freeBytes = devShmFreeBytes();
  if (freeBytes < bytes + 16 * kMiB) {
    r.unavailable = "/dev/shm has " + std::to_string(freeBytes / kMiB) + " MiB free, " +
                    std::to_string(bytes / kMiB) + " MiB needed";
    return r;
  }
  const std::string name =
      "/lanes-staging-copy-" + std::to_string(::getpid()) + "-" + std::to_string(serial);
  const Fd fd(::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600));
  if (fd.get() < 0) {
    r.unavailable = errnoText(("shm_open " + name).c_str());
    return r;
  }
  ::shm_unlink(name.c_str());  // the mapping keeps the pages; no name left behind
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) {
    r.unavailable = errnoText("ftruncate");
    return r;
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) {
    r.unavailable = errnoText("mmap");
    return r;
  }
  r.mapping = std::unique_ptr<void, Munmap>(p, Munmap{bytes});
  r.data = static_cast<char*>(p);
  r.bytes = bytes;
  if (hugeAdvice) {
    if (::madvise(p, bytes, MADV_HUGEPAGE) != 0) {
      r.unavailable = errnoText("madvise(MADV_HUGEPAGE)");
      return r;
    }
    std::memset(p, 0, bytes);
  } else if (int err = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(bytes)); err != 0) {
    r.unavailable = std::string("posix_fallocate: ") + std::strerror(err);
    return r;
  }
  r.unavailable = registerLikeArena(r);
  if (r.ok()) r.describe();
  return r;
}

HostRegion anonymous(size_t bytes) {
  HostRegion r;
  r.label = "(d) anonymous mmap";
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    r.unavailable = errnoText("mmap");
    return r;
  }
  r.mapping = std::unique_ptr<void, Munmap>(p, Munmap{bytes});
  r.data = static_cast<char*>(p);
  r.bytes = bytes;
  std::memset(p, 0, bytes);
  r.unavailable = registerLikeArena(r);
  if (r.ok()) r.describe();
  return r;
}

// ---- gate and timed runs ------------------------------------------------------------

__device__ __forceinline__ unsigned long long globalTimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// The first gate to run sets the release time; every gate spins until it.
__global__ void gateKernel(unsigned long long* release, unsigned long long delayNs) {
  unsigned long long target = globalTimer() + delayNs;
  const unsigned long long prev = atomicCAS(release, 0ULL, target);
  if (prev != 0) target = prev;
  while (globalTimer() < target) __nanosleep(2000);
}

struct Copy {
  void* dst;
  const void* src;
  size_t bytes;
  cudaMemcpyKind kind;
};

struct Job {
  cudaStream_t stream;
  bool d2h;
  std::vector<Copy> copies;
};

struct Timing {
  double d2hSec = 0, h2dSec = 0;
  size_t d2hBytes = 0, h2dBytes = 0;
  bool enqueueBound = false;
  double gbps(bool d2h) const {
    const double s = d2h ? d2hSec : h2dSec;
    return s > 0 ? (d2h ? d2hBytes : h2dBytes) / s / 1e9 : 0;
  }
};

class Runner {
 public:
  Runner() : release_(deviceBuffer(sizeof(unsigned long long))) {}

  // Runs the jobs once, all streams released together; a direction's time spans its
  // earliest start to its latest end.
  Timing run(const std::vector<Job>& jobs) {
    std::vector<cudaStream_t> streams;
    for (const Job& j : jobs) streams.push_back(j.stream);
    std::vector<Event> starts = gate(streams), ends;
    size_t most = 0;
    for (const Job& j : jobs) most = std::max(most, j.copies.size());
    for (size_t i = 0; i < most; ++i)  // round robin: no stream waits on another's enqueue
      for (const Job& j : jobs)
        if (i < j.copies.size()) {
          const Copy& c = j.copies[i];
          CK(cudaMemcpyAsync(c.dst, c.src, c.bytes, c.kind, j.stream));
        }
    for (const Job& j : jobs) {
      ends.push_back(event());
      CK(cudaEventRecord(ends.back().get(), j.stream));
    }
    Timing t;
    t.enqueueBound = anyDone(starts);
    CK(cudaDeviceSynchronize());
    for (bool d2h : {true, false}) {
      float worst = 0;
      size_t bytes = 0;
      for (size_t k = 0; k < jobs.size(); ++k) {
        if (jobs[k].d2h != d2h) continue;
        for (const Copy& c : jobs[k].copies) bytes += c.bytes;
        for (size_t j = 0; j < jobs.size(); ++j) {
          if (jobs[j].d2h != d2h) continue;
          float ms = 0;
          CK(cudaEventElapsedTime(&ms, starts[j].get(), ends[k].get()));
          worst = std::max(worst, ms);
        }
      }
      (d2h ? t.d2hSec : t.h2dSec) = worst / 1e3;
      (d2h ? t.d2hBytes : t.h2dBytes) = bytes;
    }
    return t;
  }

  // Parks the streams until one release time 50 ms after the first gate runs; returns an
  // event recorded on each stream as it is released.
  std::vector<Event> gate(const std::vector<cudaStream_t>& streams) {
    CK(cudaMemset(release_.get(), 0, sizeof(unsigned long long)));
    CK(cudaDeviceSynchronize());
    std::vector<Event> released;
    for (cudaStream_t s : streams) {
      gateKernel<<<1, 1, 0, s>>>(static_cast<unsigned long long*>(release_.get()), kGateNs);
      CK(cudaGetLastError());
      released.push_back(event());
      CK(cudaEventRecord(released.back().get(), s));
    }
    return released;
  }

  // True when a gate had opened already: the host was slower than the gate.
  static bool anyDone(const std::vector<Event>& events) {
    bool done = false;
    for (const Event& e : events) {
      const cudaError_t q = cudaEventQuery(e.get());
      if (q == cudaSuccess)
        done = true;
      else if (q != cudaErrorNotReady)
        CK(q);
    }
    return done;
  }

  // Best (shortest) time per direction over reps, after warm runs.
  Timing best(const std::vector<Job>& jobs, int warm, int reps) {
    for (int i = 0; i < warm; ++i) run(jobs);
    Timing b;
    for (int i = 0; i < reps; ++i) {
      const Timing t = run(jobs);
      if (i == 0 || t.d2hSec < b.d2hSec) b.d2hSec = t.d2hSec;
      if (i == 0 || t.h2dSec < b.h2dSec) b.h2dSec = t.h2dSec;
      b.d2hBytes = t.d2hBytes;
      b.h2dBytes = t.h2dBytes;
      b.enqueueBound = b.enqueueBound || t.enqueueBound;
    }
    return b;
  }

 private:
  static constexpr unsigned long long kGateNs = 50'000'000;  // 50 ms to enqueue everything
  DeviceBuffer release_;
};

// totalBytes in copies of `chunk` bytes, cycling through host[0, hostBytes) and dev[0, devBytes).
Job makeJob(cudaStream_t s, bool d2h, char* host, size_t hostBytes, char* dev, size_t devBytes,
            size_t chunk, size_t totalBytes) {
  Job j{s, d2h, {}};
  const size_t hostSlots = std::max<size_t>(1, hostBytes / chunk);
  const size_t devSlots = std::max<size_t>(1, devBytes / chunk);
  for (size_t i = 0; i < std::max<size_t>(1, totalBytes / chunk); ++i) {
    char* h = host + (i % hostSlots) * chunk;
    char* d = dev + (i % devSlots) * chunk;
    j.copies.push_back(d2h ? Copy{h, d, chunk, cudaMemcpyDeviceToHost}
                           : Copy{d, h, chunk, cudaMemcpyHostToDevice});
  }
  return j;
}

// The part of a region one of `ways` streams uses: a whole number of chunks.
struct Share {
  Share(size_t regionBytes, int ways, size_t chunk)
      : bytes(std::max(chunk, regionBytes / static_cast<size_t>(ways) / chunk * chunk)),
        span(std::max(chunk, regionBytes / chunk * chunk) - bytes + chunk) {}
  size_t offset(int i) const { return (static_cast<size_t>(i) * bytes) % span; }
  size_t bytes;
  size_t span;  // offsets stay below this so offset + bytes <= the region
};

// ---- stream memory operations (as src/exec/cuda/stream_memops.cc) -------------------

using MemopFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

struct Memops {
  MemopFn write = nullptr;
  MemopFn wait = nullptr;
};

Memops memops() {
  Memops m;
  void* w = nullptr;
  void* wt = nullptr;
  cudaDriverEntryPointQueryResult q1{}, q2{};
  CK(cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &w, 12000, cudaEnableDefault, &q1));
  CK(cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &wt, 12000, cudaEnableDefault, &q2));
  if (q1 != cudaDriverEntryPointSuccess || q2 != cudaDriverEntryPointSuccess)
    throw std::runtime_error("the driver has no cuStreamWriteValue32/cuStreamWaitValue32");
  m.write = reinterpret_cast<MemopFn>(w);
  m.wait = reinterpret_cast<MemopFn>(wt);
  return m;
}

void checkCu(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS)
    throw std::runtime_error(std::string(what) + " failed with CUresult " + std::to_string(r));
}

struct RoundTrip {
  double us = -1;  // negative: the streams stalled (the host raised both flags to free them)
  bool enqueueBound = false;
};

// Round trip of `iters` ping-pongs between two streams through two flags in host memory
// (each on its own 128-byte line of `flags`), both streams released by one gate.
RoundTrip pingPong(const Memops& m, Runner& runner, volatile uint32_t* flags, int iters) {
  volatile uint32_t* ping = flags;
  volatile uint32_t* pong = flags + 32;
  *ping = 0;
  *pong = 0;
  void* dPing = nullptr;
  void* dPong = nullptr;
  CK(cudaHostGetDevicePointer(&dPing, const_cast<uint32_t*>(ping), 0));
  CK(cudaHostGetDevicePointer(&dPong, const_cast<uint32_t*>(pong), 0));
  const auto pingAddr = reinterpret_cast<CUdeviceptr>(dPing);
  const auto pongAddr = reinterpret_cast<CUdeviceptr>(dPong);
  Stream a = stream(), b = stream();
  const std::vector<Event> released = runner.gate({a.get(), b.get()});
  Event end = event();
  for (int i = 1; i <= iters; ++i) {
    const auto v = static_cast<cuuint32_t>(i);
    checkCu(m.write(a.get(), pingAddr, v, CU_STREAM_WRITE_VALUE_DEFAULT), "cuStreamWriteValue32");
    checkCu(m.wait(a.get(), pongAddr, v, CU_STREAM_WAIT_VALUE_GEQ), "cuStreamWaitValue32");
    checkCu(m.wait(b.get(), pingAddr, v, CU_STREAM_WAIT_VALUE_GEQ), "cuStreamWaitValue32");
    checkCu(m.write(b.get(), pongAddr, v, CU_STREAM_WRITE_VALUE_DEFAULT), "cuStreamWriteValue32");
  }
  CK(cudaEventRecord(end.get(), a.get()));
  RoundTrip rt;
  rt.enqueueBound = Runner::anyDone(released);
  // Bounded wait: two streams that share a hardware queue would block each other.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  bool stalled = false;
  for (;;) {
    const cudaError_t q = cudaEventQuery(end.get());
    if (q == cudaSuccess) break;
    if (q != cudaErrorNotReady) CK(q);
    if (std::chrono::steady_clock::now() > deadline) {
      stalled = true;
      *ping = static_cast<uint32_t>(iters);
      *pong = static_cast<uint32_t>(iters);
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  CK(cudaDeviceSynchronize());
  if (stalled) return rt;
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, released[0].get(), end.get()));
  rt.us = ms * 1e3 / iters;
  return rt;
}

// ---- report -------------------------------------------------------------------------

std::string sizeText(size_t b) {
  return b >= kMiB ? std::to_string(b / kMiB) + " MiB" : std::to_string(b / kKiB) + " KiB";
}

std::string pciSysfs(int device, const char* file) {
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof(bus), device) != cudaSuccess) return "?";
  std::string id = bus;
  std::transform(id.begin(), id.end(), id.begin(), [](unsigned char c) { return std::tolower(c); });
  if (id.size() > 12) id = id.substr(id.size() - 12);  // "0000:1b:00.0" from "00000000:1B:00.0"
  return readLine("/sys/bus/pci/devices/" + id + "/" + file);
}

struct Options {
  int gpu = 0;
  bool quick = false;
};

int usage(const char* argv0, int rc) {
  std::fprintf(rc ? stderr : stdout,
               "usage: %s [--gpu N] [--quick]\n"
               "  Copy-engine bandwidth into host memory kinds Lanes stages through, both\n"
               "  directions at once, many streams, and the stream-memop handshake latency.\n"
               "  --gpu N   GPU to measure (default 0)\n"
               "  --quick   1 and 4 MiB chunks only, one timed run per row\n",
               argv0);
  return rc;
}

int runAll(const Options& opt) {
  const auto began = std::chrono::steady_clock::now();
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess || count == 0) {
    std::fprintf(stderr,
                 "staging_copy: no CUDA GPU visible (cudaGetDeviceCount: %s); run it on a "
                 "machine with an NVIDIA GPU and driver\n",
                 e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
    return 2;
  }
  if (opt.gpu < 0 || opt.gpu >= count) {
    std::fprintf(stderr, "staging_copy: --gpu %d, but %d GPU(s) are visible\n", opt.gpu, count);
    return 2;
  }
  CK(cudaSetDevice(opt.gpu));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, opt.gpu));
  int driver = 0, runtime = 0;
  CK(cudaDriverGetVersion(&driver));
  CK(cudaRuntimeGetVersion(&runtime));
  const char* conns = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  std::printf("# GPU %d: %s, asyncEngineCount %d, driver %d, runtime %d\n", opt.gpu, prop.name,
              prop.asyncEngineCount, driver, runtime);
  std::printf("# PCIe link %s x%s (max %s x%s), GPU NUMA node %s, CUDA_DEVICE_MAX_CONNECTIONS=%s\n",
              pciSysfs(opt.gpu, "current_link_speed").c_str(),
              pciSysfs(opt.gpu, "current_link_width").c_str(),
              pciSysfs(opt.gpu, "max_link_speed").c_str(),
              pciSysfs(opt.gpu, "max_link_width").c_str(), pciSysfs(opt.gpu, "numa_node").c_str(),
              conns ? conns : "(unset: 8)");
  std::printf("# THP: shmem_enabled %s; enabled (anon) %s\n",
              readLine("/sys/kernel/mm/transparent_hugepage/shmem_enabled").c_str(),
              readLine("/sys/kernel/mm/transparent_hugepage/enabled").c_str());
  std::printf(
      "# GB/s = 1e9 B/s, CUDA events; best of %s; '*' = copies still being enqueued "
      "when the streams started\n",
      opt.quick ? "1 run" : "3 runs after 1 warm-up");

  const int warm = opt.quick ? 0 : 1, reps = opt.quick ? 1 : 3;
  const size_t total = opt.quick ? 512 * kMiB : kGiB;
  const std::vector<size_t> chunks =
      opt.quick ? std::vector<size_t>{kMiB, 4 * kMiB}
                : std::vector<size_t>{256 * kKiB, kMiB, 4 * kMiB, 16 * kMiB};
  // Host regions of 256 MiB (the copies cycle through them), less if /dev/shm is small.
  size_t regionBytes = 256 * kMiB;
  const size_t shmFree = devShmFreeBytes();
  while (regionBytes > 32 * kMiB && 2 * regionBytes + 32 * kMiB > shmFree) regionBytes /= 2;
  DeviceBuffer devA = deviceBuffer(regionBytes), devB = deviceBuffer(regionBytes);
  char* dA = static_cast<char*>(devA.get());
  char* dB = static_cast<char*>(devB.get());

  std::vector<HostRegion> regions;
  regions.push_back(hostAlloc(regionBytes));
  regions.push_back(sharedMemory(regionBytes, false, 0));
  regions.push_back(sharedMemory(regionBytes, true, 1));
  regions.push_back(anonymous(regionBytes));
  std::printf("# host regions of %s (/dev/shm free %zu MiB):\n", sizeText(regionBytes).c_str(),
              shmFree / kMiB);
  for (const HostRegion& r : regions) {
    if (r.ok())
      std::printf("#   %-26s %-22s %s\n", r.label.c_str(), r.pages.c_str(), r.numa.c_str());
    else
      std::printf("#   %-26s unavailable: %s\n", r.label.c_str(), r.unavailable.c_str());
  }

  Runner runner;
  Stream s0 = stream(), s1 = stream();

  // Q1: one direction at a time.
  std::printf("\n# Q1: one direction at a time, one stream, %s per run\n", sizeText(total).c_str());
  std::printf("%-28s %8s %10s %10s\n", "memory", "chunk", "D2H GB/s", "H2D GB/s");
  std::vector<std::vector<Timing>> alone(regions.size());
  for (size_t k = 0; k < regions.size(); ++k) {
    HostRegion& r = regions[k];
    if (!r.ok()) continue;
    for (size_t chunk : chunks) {
      const Timing d2h = runner.best(
          {makeJob(s0.get(), true, r.data, r.bytes, dA, regionBytes, chunk, total)}, warm, reps);
      const Timing h2d = runner.best(
          {makeJob(s0.get(), false, r.data, r.bytes, dA, regionBytes, chunk, total)}, warm, reps);
      alone[k].push_back(d2h);
      alone[k].back().h2dSec = h2d.h2dSec;
      alone[k].back().h2dBytes = h2d.h2dBytes;
      std::printf("%-28s %8s %9.2f%s %9.2f%s\n", r.label.c_str(), sizeText(chunk).c_str(),
                  d2h.gbps(true), d2h.enqueueBound ? "*" : " ", h2d.gbps(false),
                  h2d.enqueueBound ? "*" : " ");
    }
  }

  // Q2: both directions at once, one stream each, 4 MiB chunks.
  const size_t q2chunk = 4 * kMiB;
  const size_t q2index =
      static_cast<size_t>(std::find(chunks.begin(), chunks.end(), q2chunk) - chunks.begin());
  std::printf(
      "\n# Q2: both directions at once, D2H on one stream and H2D on another, %s "
      "chunks, %s each way\n",
      sizeText(q2chunk).c_str(), sizeText(total).c_str());
  std::printf(
      "# overlap = (D2H time alone + H2D time alone, from Q1) / time together: 2.00 "
      "both engines fully busy together, 1.00 serialised\n");
  std::printf("%-28s %10s %10s %10s %8s\n", "memory", "D2H GB/s", "H2D GB/s", "sum GB/s",
              "overlap");
  for (size_t k : {size_t{0}, size_t{1}}) {
    HostRegion& r = regions[k];
    if (!r.ok()) continue;
    const size_t half = r.bytes / 2;
    const Timing t = runner.best(
        {makeJob(s0.get(), true, r.data, half, dA, regionBytes, q2chunk, total),
         makeJob(s1.get(), false, r.data + half, half, dB, regionBytes, q2chunk, total)},
        warm, reps);
    const Timing& a = alone[k][q2index];
    const double overlap = (a.d2hSec + a.h2dSec) / std::max(t.d2hSec, t.h2dSec);
    std::printf("%-28s %9.2f%s %9.2f  %9.2f %8.2f\n", r.label.c_str(), t.gbps(true),
                t.enqueueBound ? "*" : " ", t.gbps(false), t.gbps(true) + t.gbps(false), overlap);
  }

  // Q3: N streams per direction on the arena-like memory (N ranks x their copy streams).
  HostRegion& shm = regions[1];
  std::printf(
      "\n# Q3: N streams doing D2H and N doing H2D at once, %s, %s per direction in "
      "all\n",
      shm.label.c_str(), sizeText(total).c_str());
  std::printf("%10s %8s %10s %10s %10s\n", "streams", "chunk", "D2H GB/s", "H2D GB/s", "sum GB/s");
  if (shm.ok()) {
    for (int n : {1, 2, 4, 6}) {
      std::vector<Stream> streams;
      for (int i = 0; i < 2 * n; ++i) streams.push_back(stream());
      for (size_t chunk : {4 * kMiB, kMiB}) {
        std::vector<Job> jobs;
        // Each stream cycles through its own chunk-aligned share of the host region and
        // of a device buffer (shares wrap around, overlapping, if the region is small).
        const Share host(shm.bytes, 2 * n, chunk), dev(regionBytes, n, chunk);
        for (int i = 0; i < n; ++i) {
          jobs.push_back(makeJob(streams[2 * i].get(), true, shm.data + host.offset(2 * i),
                                 host.bytes, dA + dev.offset(i), dev.bytes, chunk, total / n));
          jobs.push_back(makeJob(streams[2 * i + 1].get(), false, shm.data + host.offset(2 * i + 1),
                                 host.bytes, dB + dev.offset(i), dev.bytes, chunk, total / n));
        }
        const Timing t = runner.best(jobs, warm, reps);
        std::printf("%7d x2 %8s %9.2f%s %9.2f  %9.2f\n", n, sizeText(chunk).c_str(), t.gbps(true),
                    t.enqueueBound ? "*" : " ", t.gbps(false), t.gbps(true) + t.gbps(false));
      }
    }
  } else {
    std::printf("  skipped: %s\n", shm.unavailable.c_str());
  }

  // Q4: the per-chunk handshake, cuStreamWriteValue32 -> cuStreamWaitValue32 and back.
  constexpr int kIters = 1000;
  std::printf(
      "\n# Q4: cuStreamWriteValue32 -> cuStreamWaitValue32 ping-pong between two "
      "streams, %d round trips\n",
      kIters);
  std::printf("%-28s %14s %14s\n", "flag memory", "best RT us", "median RT us");
  const Memops m = memops();
  for (size_t k : {size_t{1}, size_t{0}}) {
    HostRegion& r = regions[k];
    if (!r.ok()) continue;
    std::vector<double> rts;
    bool stalled = false, bound = false;
    for (int i = 0; i < 5 && !stalled; ++i) {
      const RoundTrip rt =
          pingPong(m, runner, reinterpret_cast<volatile uint32_t*>(r.data), kIters);
      stalled = rt.us < 0;
      bound = bound || rt.enqueueBound;
      rts.push_back(rt.us);
    }
    if (stalled) {
      std::printf("%-28s stalled for 5 s (streams sharing a hardware queue?)\n", r.label.c_str());
      continue;
    }
    std::sort(rts.begin(), rts.end());
    std::printf("%-28s %13.2f%s %14.2f\n", r.label.c_str(), rts.front(), bound ? "*" : " ",
                rts[rts.size() / 2]);
  }

  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  std::printf("\n# done in %.1f s\n", secs);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      opt.quick = true;
    } else if (a == "--gpu" && i + 1 < argc) {
      char* end = nullptr;
      opt.gpu = static_cast<int>(std::strtol(argv[++i], &end, 10));
      if (*end != '\0') return usage(argv[0], 2);
    } else if (a == "--help" || a == "-h") {
      return usage(argv[0], 0);
    } else {
      std::fprintf(stderr, "staging_copy: unknown argument '%s'\n", a.c_str());
      return usage(argv[0], 2);
    }
  }
  try {
    return runAll(opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "staging_copy: %s\n", e.what());
    return 1;
  }
}
