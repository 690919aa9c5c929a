// lanes_micro_cpu_reduce: kernels/cpu sum reduction, every datatype, at
// 4 KiB / 1 MiB / 64 MiB. dst = a + b into a third buffer, so values stay
// bounded however many iterations run.
//
// bytes_per_second counts one buffer per call (the message size reduced per
// second, the unit bus bandwidth is in); "traffic" counts the memory moved
// (two reads and one write, 3x), to hold against the machine's DRAM bandwidth.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "base/datatype.h"
#include "fill.h"
#include "kernels/cpu/reduce.h"

namespace lanes::micro {
namespace {

void cpuReduceSum(benchmark::State& state, lanesDataType_t type) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const size_t count = bytes / datatypeSize(type);
  std::vector<unsigned char> a = filledBuffer(type, bytes, 0);
  std::vector<unsigned char> b = filledBuffer(type, bytes, 3);
  std::vector<unsigned char> dst(bytes);
  for (auto _ : state) {
    cpu::reduce(dst.data(), a.data(), b.data(), count, type, RedOpKind::Sum);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  const auto done = static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes);
  state.SetBytesProcessed(done);
  state.counters["traffic"] = benchmark::Counter(
      3.0 * static_cast<double>(done), benchmark::Counter::kIsRate, benchmark::Counter::kIs1024);
}

}  // namespace
}  // namespace lanes::micro

int main(int argc, char** argv) {
  using namespace lanes::micro;
  for (lanesDataType_t type : kAllTypes) {
    auto* b = benchmark::RegisterBenchmark(
        (std::string("cpu_reduce_sum/") + lanes::datatypeName(type)).c_str(), cpuReduceSum, type);
    for (size_t bytes : kSizes) b->Arg(static_cast<int64_t>(bytes));
    b->ArgName("bytes")->Unit(benchmark::kMicrosecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
