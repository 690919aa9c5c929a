// lanes_micro_gpu_reduce: kernels/cuda reduction kernels (launchReduce), sum
// of two sources for every datatype at 4 KiB / 1 MiB / 64 MiB, and float with
// 2..8 sources (the staged paths reduce several peers' chunks in one pass).
// Timed with CUDA events around each launch (manual time), so small sizes show
// launch + kernel latency and large ones the kernel's bandwidth.
// bytes_per_second counts one buffer per call; "traffic" counts memory moved
// (nsrcs reads + one write), to hold against the GPU's HBM bandwidth.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "base/datatype.h"
#include "fill.h"
#include "kernels/cuda/reduce.h"

namespace lanes::micro {
namespace {

struct DeviceFree {
  void operator()(void* p) const { cudaFree(p); }
};
using DeviceBuffer = std::unique_ptr<void, DeviceFree>;

struct EventDestroy {
  void operator()(cudaEvent_t e) const { cudaEventDestroy(e); }
};
using Event = std::unique_ptr<CUevent_st, EventDestroy>;

struct StreamDestroy {
  void operator()(cudaStream_t s) const { cudaStreamDestroy(s); }
};
using Stream = std::unique_ptr<CUstream_st, StreamDestroy>;

bool gpuVisible() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

DeviceBuffer deviceCopyOf(const std::vector<unsigned char>& host, std::string* error) {
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, host.size());
  DeviceBuffer buf(err == cudaSuccess ? p : nullptr);
  if (err == cudaSuccess) err = cudaMemcpy(p, host.data(), host.size(), cudaMemcpyHostToDevice);
  if (err != cudaSuccess) {
    *error = std::string("cudaMalloc/cudaMemcpy of ") + std::to_string(host.size()) +
             " bytes failed: " + cudaGetErrorString(err);
    return nullptr;
  }
  return buf;
}

void gpuReduceSum(benchmark::State& state, lanesDataType_t type) {
  if (!gpuVisible()) {
    state.SkipWithError("no GPU");
    return;
  }
  const auto bytes = static_cast<size_t>(state.range(0));
  const auto nsrcs = static_cast<int>(state.range(1));
  const size_t count = bytes / datatypeSize(type);
  std::string error;
  std::vector<DeviceBuffer> srcs;
  std::vector<const void*> srcPtrs;
  for (int s = 0; s < nsrcs && error.empty(); ++s) {
    srcs.push_back(deviceCopyOf(filledBuffer(type, bytes, s), &error));
    srcPtrs.push_back(srcs.back().get());
  }
  DeviceBuffer dst =
      error.empty() ? deviceCopyOf(std::vector<unsigned char>(bytes), &error) : nullptr;
  cudaStream_t rawStream = nullptr;
  cudaEvent_t rawBegin = nullptr, rawEnd = nullptr;
  if (error.empty() &&
      (cudaStreamCreateWithFlags(&rawStream, cudaStreamNonBlocking) != cudaSuccess ||
       cudaEventCreate(&rawBegin) != cudaSuccess || cudaEventCreate(&rawEnd) != cudaSuccess))
    error = "cudaStreamCreate/cudaEventCreate failed";
  Stream stream(rawStream);
  Event begin(rawBegin), end(rawEnd);
  if (!error.empty()) {
    state.SkipWithError(error.c_str());
    return;
  }
  for (auto _ : state) {
    cudaEventRecord(begin.get(), stream.get());
    int err = cuda::launchReduce(dst.get(), srcPtrs.data(), nsrcs, count, type, RedOpKind::Sum, 1.0,
                                 0, stream.get());
    cudaEventRecord(end.get(), stream.get());
    if (err != 0 || cudaEventSynchronize(end.get()) != cudaSuccess) {
      state.SkipWithError(
          ("launchReduce failed: " + std::string(cudaGetErrorString(static_cast<cudaError_t>(err))))
              .c_str());
      break;
    }
    float ms = 0;
    cudaEventElapsedTime(&ms, begin.get(), end.get());
    state.SetIterationTime(ms / 1e3);
  }
  const auto done = static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes);
  state.SetBytesProcessed(done);
  state.counters["traffic"] =
      benchmark::Counter(static_cast<double>(nsrcs + 1) * static_cast<double>(done),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1024);
}

}  // namespace
}  // namespace lanes::micro

int main(int argc, char** argv) {
  using namespace lanes::micro;
  for (lanesDataType_t type : kAllTypes) {
    auto* b = benchmark::RegisterBenchmark(
        (std::string("gpu_reduce_sum/") + lanes::datatypeName(type)).c_str(), gpuReduceSum, type);
    for (size_t bytes : kSizes) b->Args({static_cast<int64_t>(bytes), 2});
    b->ArgNames({"bytes", "srcs"})->UseManualTime()->Unit(benchmark::kMicrosecond);
  }
  benchmark::RegisterBenchmark("gpu_reduce_sum_sources/float", gpuReduceSum, lanesFloat32)
      ->ArgsProduct({{64 << 20}, {2, 4, 8}})
      ->ArgNames({"bytes", "srcs"})
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
