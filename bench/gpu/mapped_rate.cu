// How fast a kernel's own loads and stores move data through mapped pinned host
// memory, against the copy engines on the same link: one way, and both ways at
// once. The simple and LL kernels (kernels/cuda/simple_collective.h) move every
// byte this way; this tool measures what the link allows them.
//
// Each figure is the best of the rounds, each round `iters` back-to-back runs
// timed by events. "both" runs a writer grid and a reader grid (or a D2H and an
// H2D copy) on two streams at once, each grid of the given blocks, and reports
// each direction's rate. "ce down" and "ce up" mix the two: a copy one way and
// the kernel the other (a protocol that lets the copy engines carry one
// direction).
//
//   lanes_mapped_rate [--bytes N[,N...]] [--blocks B[,B...]] [--iters I] [--rounds R]
//                     [--device D]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "cuda_bench.h"

namespace {

using lanes::bench::DeviceBuffer;
using lanes::bench::Event;

constexpr int kThreads = 512;
constexpr int kUnroll = 4;  // loads in flight per thread, as the simple kernel's readers

// Pinned host memory mapped into the GPU's address space, as the LL arena's.
class MappedBuffer {
 public:
  explicit MappedBuffer(size_t bytes) {
    CHECK_CUDA(cudaHostAlloc(&host_, bytes, cudaHostAllocMapped));
    CHECK_CUDA(cudaHostGetDevicePointer(&device_, host_, 0));
  }
  ~MappedBuffer() { cudaFreeHost(host_); }
  MappedBuffer(const MappedBuffer&) = delete;
  MappedBuffer& operator=(const MappedBuffer&) = delete;
  void* host() const { return host_; }
  uint4* device() const { return static_cast<uint4*>(device_); }

 private:
  void* host_ = nullptr;
  void* device_ = nullptr;
};

class Stream {
 public:
  Stream() { CHECK_CUDA(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(s_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  operator cudaStream_t() const { return s_; }

 private:
  cudaStream_t s_{};
};

// Stores into mapped host memory, 16 bytes a thread at a time.
__global__ void storeKernel(const uint4* __restrict__ src, uint4* dst, size_t vectors) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < vectors;
       i += stride)
    dst[i] = src[i];
}

// Loads from mapped host memory past the caches (volatile, as the kernels'
// reads of slots another process writes), kUnroll in flight per thread.
__global__ void loadKernel(const uint4* src, uint4* __restrict__ dst, size_t vectors) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < vectors;
       i += stride * kUnroll) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t k = i + u * stride;
      if (k < vectors)
        asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                     : "l"(src + k));
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (i + u * stride < vectors) dst[i + u * stride] = v[u];
  }
}

struct Options {
  std::vector<size_t> bytes{size_t{1} << 20, size_t{4} << 20, size_t{16} << 20};
  std::vector<int> blocks{8, 16, 32, 64, 132};
  int iters = 20;
  int rounds = 3;
  int device = 0;
};

template <class T>
std::vector<T> parseList(const char* s, T (*parse)(const char*)) {
  std::vector<T> out;
  std::string text(s);
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = text.find(',', at);
    const std::string item = text.substr(at, comma == std::string::npos ? comma : comma - at);
    const T v = parse(item.c_str());
    if (v <= 0) {
      std::fprintf(stderr, "lanes_mapped_rate: '%s' is not a positive number\n", item.c_str());
      std::exit(2);
    }
    out.push_back(v);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

size_t parseBytes(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end == s) return 0;
  switch (*end) {
    case 'K':
    case 'k':
      v *= 1024;
      break;
    case 'M':
    case 'm':
      v *= 1024 * 1024;
      break;
    case 'G':
    case 'g':
      v *= 1024.0 * 1024 * 1024;
      break;
    default:
      break;
  }
  return static_cast<size_t>(v) / 16 * 16;
}

int parseInt(const char* s) { return std::atoi(s); }

Options parseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    auto need = [&] {
      if (v == nullptr) {
        std::fprintf(stderr, "lanes_mapped_rate: %s needs a value\n", a);
        std::exit(2);
      }
      ++i;
      return v;
    };
    if (!std::strcmp(a, "--bytes")) {
      o.bytes = parseList<size_t>(need(), parseBytes);
    } else if (!std::strcmp(a, "--blocks")) {
      o.blocks = parseList<int>(need(), parseInt);
    } else if (!std::strcmp(a, "--iters")) {
      o.iters = std::max(1, std::atoi(need()));
    } else if (!std::strcmp(a, "--rounds")) {
      o.rounds = std::max(1, std::atoi(need()));
    } else if (!std::strcmp(a, "--device")) {
      o.device = std::atoi(need());
    } else {
      std::fprintf(stderr,
                   "usage: lanes_mapped_rate [--bytes N[,N...]] [--blocks B[,B...]] "
                   "[--iters I] [--rounds R] [--device D]\n");
      std::exit(std::strcmp(a, "--help") && std::strcmp(a, "-h") ? 2 : 0);
    }
  }
  return o;
}

// Best time of one `work` over the rounds (us), work enqueued on `s` (and
// joined back to it when it forks).
double bestUs(const Options& o, cudaStream_t s, const std::function<void()>& work) {
  Event start, stop;
  work();  // warm-up
  double best = 1e30;
  for (int r = 0; r < o.rounds; ++r) {
    CHECK_CUDA(cudaEventRecord(start.get(), s));
    for (int i = 0; i < o.iters; ++i) work();
    CHECK_CUDA(cudaEventRecord(stop.get(), s));
    CHECK_CUDA(cudaEventSynchronize(stop.get()));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    best = std::min(best, 1000.0 * ms / o.iters);
  }
  return best;
}

double gbs(size_t bytes, double us) { return static_cast<double>(bytes) / us / 1e3; }

}  // namespace

int main(int argc, char** argv) {
  const Options o = parseOptions(argc, argv);
  CHECK_CUDA(cudaSetDevice(o.device));
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, o.device));
  size_t most = 0;
  for (size_t b : o.bytes) most = std::max(most, b);
  DeviceBuffer d0(most), d1(most);
  MappedBuffer h0(most), h1(most);
  Stream s0, s1;
  Event forked(cudaEventDisableTiming), joined(cudaEventDisableTiming);
  // Runs a on s0 and b on s1 at once; s0 waits for both.
  auto both = [&](const std::function<void()>& a, const std::function<void()>& b) {
    CHECK_CUDA(cudaEventRecord(forked.get(), s0));
    CHECK_CUDA(cudaStreamWaitEvent(s1, forked.get()));
    a();
    b();
    CHECK_CUDA(cudaEventRecord(joined.get(), s1));
    CHECK_CUDA(cudaStreamWaitEvent(s0, joined.get()));
  };
  std::printf(
      "# lanes_mapped_rate: %s (device %d), %d threads a block, %d loads in flight a "
      "thread; GB/s = 1e9 B/s, best of %d rounds of %d\n",
      prop.name, o.device, kThreads, kUnroll, o.rounds, o.iters);
  std::printf("# %10s %8s %10s %10s %10s %10s %10s\n", "bytes", "engine", "D2H", "H2D", "both each",
              "ce down", "ce up");
  for (size_t bytes : o.bytes) {
    const size_t vectors = bytes / 16;
    auto d2h = [&](cudaStream_t s) {
      CHECK_CUDA(cudaMemcpyAsync(h0.host(), static_cast<uint4*>(d0.get()), bytes,
                                 cudaMemcpyDeviceToHost, s));
    };
    auto h2d = [&](cudaStream_t s) {
      CHECK_CUDA(cudaMemcpyAsync(static_cast<uint4*>(d1.get()), h1.host(), bytes,
                                 cudaMemcpyHostToDevice, s));
    };
    const double down = bestUs(o, s0, [&] { d2h(s0); });
    const double up = bestUs(o, s0, [&] { h2d(s0); });
    const double twoWays = bestUs(o, s0, [&] { both([&] { d2h(s0); }, [&] { h2d(s1); }); });
    std::printf("  %10zu %8s %10.1f %10.1f %10.1f %10s %10s\n", bytes, "copy", gbs(bytes, down),
                gbs(bytes, up), gbs(bytes, twoWays), "-", "-");
    for (int b : o.blocks) {
      auto store = [&](cudaStream_t s) {
        storeKernel<<<b, kThreads, 0, s>>>(static_cast<uint4*>(d0.get()), h0.device(), vectors);
      };
      auto load = [&](cudaStream_t s) {
        loadKernel<<<b, kThreads, 0, s>>>(h1.device(), static_cast<uint4*>(d1.get()), vectors);
      };
      const double st = bestUs(o, s0, [&] { store(s0); });
      const double ld = bestUs(o, s0, [&] { load(s0); });
      const double bw = bestUs(o, s0, [&] { both([&] { store(s0); }, [&] { load(s1); }); });
      const double ceDown = bestUs(o, s0, [&] { both([&] { d2h(s0); }, [&] { load(s1); }); });
      const double ceUp = bestUs(o, s0, [&] { both([&] { store(s0); }, [&] { h2d(s1); }); });
      CHECK_CUDA(cudaGetLastError());
      char name[16];
      std::snprintf(name, sizeof name, "sm x%d", b);
      std::printf("  %10zu %8s %10.1f %10.1f %10.1f %10.1f %10.1f\n", bytes, name, gbs(bytes, st),
                  gbs(bytes, ld), gbs(bytes, bw), gbs(bytes, ceDown), gbs(bytes, ceUp));
    }
  }
  return 0;
}
