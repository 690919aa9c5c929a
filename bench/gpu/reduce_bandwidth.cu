// Reduction kernel bandwidth against the same run's device-to-device cudaMemcpy.
//
// Bandwidth counts bytes read + written: a copy of N bytes moves 2N, a 2-input
// reduce of N-byte inputs moves 3N. Measurements interleave round by round so clock
// or thermal drift hits all of them alike; each reports its best round.
//
//   lanes_reduce_bandwidth [--bytes N] [--rounds R] [--iters I] [--device D]
//
// Issue 3's target: float32 and bfloat16 2-input sum >= 93% of the memcpy bandwidth.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench/gpu/cuda_bench.h"
#include "kernels/cuda/reduce.h"

namespace {

using lanes::bench::DeviceBuffer;
using lanes::bench::Event;

struct Measurement {
  std::string name;
  double bytesMoved;                          // per call, read + written
  std::function<void(cudaStream_t)> enqueue;  // one call
  double bestSeconds = 1e30;                  // best per-call time over rounds
};

size_t parseSize(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  switch (*end) {
    case 'G':
    case 'g':
      v *= 1 << 30;
      break;
    case 'M':
    case 'm':
      v *= 1 << 20;
      break;
    case 'K':
    case 'k':
      v *= 1 << 10;
      break;
    default:
      break;
  }
  return static_cast<size_t>(v);
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = size_t{1} << 30;
  int rounds = 5;
  int iters = 10;
  int device = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--bytes"))
      bytes = parseSize(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--rounds"))
      rounds = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--iters"))
      iters = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--device"))
      device = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--bytes N[K|M|G]] [--rounds R] [--iters I] [--device D]\n",
                   argv[0]);
      return 2;
    }
  }
  bytes &= ~size_t{15};
  CHECK_CUDA(cudaSetDevice(device));
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
  std::printf("# device %d: %s, %d SMs; inputs %.3f GiB each; %d rounds x %d calls\n", device,
              prop.name, prop.multiProcessorCount, bytes / double(1 << 30), rounds, iters);

  DeviceBuffer a(bytes), b(bytes), c(bytes);
  // 0x3c bytes: float32 ~0.0115, bfloat16 ~0.0115; finite, no denormals.
  CHECK_CUDA(cudaMemset(a.get(), 0x3c, bytes));
  CHECK_CUDA(cudaMemset(b.get(), 0x3c, bytes));
  CHECK_CUDA(cudaDeviceSynchronize());  // the memsets ran on the legacy stream
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const void* srcs[2] = {a.get(), b.get()};

  std::vector<Measurement> ms;
  ms.push_back({"cudaMemcpy D2D", 2.0 * bytes, [&](cudaStream_t s) {
                  CHECK_CUDA(cudaMemcpyAsync(c.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, s));
                }});
  ms.push_back({"float32 sum, 2 inputs", 3.0 * bytes, [&](cudaStream_t s) {
                  CHECK_CUDA(lanes::cuda::launchReduce(c.get(), srcs, 2, bytes / 4, lanesFloat32,
                                                       lanes::RedOpKind::Sum, 1.0, 0, s));
                }});
  ms.push_back({"bfloat16 sum, 2 inputs", 3.0 * bytes, [&](cudaStream_t s) {
                  CHECK_CUDA(lanes::cuda::launchReduce(c.get(), srcs, 2, bytes / 2, lanesBfloat16,
                                                       lanes::RedOpKind::Sum, 1.0, 0, s));
                }});
  ms.push_back({"float32 sum, 2 inputs, in place", 3.0 * bytes, [&](cudaStream_t s) {
                  const void* inPlace[2] = {c.get(), b.get()};
                  CHECK_CUDA(lanes::cuda::launchReduce(c.get(), inPlace, 2, bytes / 4, lanesFloat32,
                                                       lanes::RedOpKind::Sum, 1.0, 0, s));
                }});
  ms.push_back({"SM copy (launchCopy)", 2.0 * bytes, [&](cudaStream_t s) {
                  CHECK_CUDA(lanes::cuda::launchCopy(c.get(), a.get(), bytes, s));
                }});

  Event start, stop;
  for (Measurement& m : ms) m.enqueue(stream);  // warm-up
  CHECK_CUDA(cudaStreamSynchronize(stream));
  for (int r = 0; r < rounds; ++r) {
    for (Measurement& m : ms) {
      CHECK_CUDA(cudaEventRecord(start.get(), stream));
      for (int i = 0; i < iters; ++i) m.enqueue(stream);
      CHECK_CUDA(cudaEventRecord(stop.get(), stream));
      CHECK_CUDA(cudaEventSynchronize(stop.get()));
      float ms_ = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms_, start.get(), stop.get()));
      m.bestSeconds = std::min(m.bestSeconds, ms_ / 1e3 / iters);
    }
  }

  // Spot check that the kernel computed something: c = a + b at both ends of the buffer.
  {
    CHECK_CUDA(lanes::cuda::launchReduce(c.get(), srcs, 2, bytes / 4, lanesFloat32,
                                         lanes::RedOpKind::Sum, 1.0, 0, stream));
    float host[2] = {0, 0}, in = 0;
    CHECK_CUDA(cudaMemcpyAsync(&host[0], c.get(), 4, cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaMemcpyAsync(&host[1], static_cast<char*>(c.get()) + bytes - 4, 4,
                               cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaMemcpyAsync(&in, a.get(), 4, cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    if (host[0] != in + in || host[1] != in + in) {
      std::fprintf(stderr, "wrong result: %g %g, expected %g\n", host[0], host[1], in + in);
      return 1;
    }
  }

  const double copyBw = ms[0].bytesMoved / ms[0].bestSeconds;
  std::printf("%-34s %12s %12s %10s\n", "# what", "time (ms)", "GB/s", "vs memcpy");
  for (const Measurement& m : ms) {
    const double bw = m.bytesMoved / m.bestSeconds;
    std::printf("%-34s %12.3f %12.1f %9.1f%%\n", m.name.c_str(), m.bestSeconds * 1e3, bw / 1e9,
                100.0 * bw / copyBw);
  }
  const double f32 = ms[1].bytesMoved / ms[1].bestSeconds / copyBw;
  const double bf16 = ms[2].bytesMoved / ms[2].bestSeconds / copyBw;
  std::printf("# target: float32 and bfloat16 2-input sum >= 93%% of memcpy: %s (%.1f%%, %.1f%%)\n",
              f32 >= 0.93 && bf16 >= 0.93 ? "MET" : "NOT MET", 100 * f32, 100 * bf16);
  CHECK_CUDA(cudaStreamDestroy(stream));
  return 0;
}
