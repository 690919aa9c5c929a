// lanes_micro_plan: time to choose an algorithm (src/planner/registry.h), the
// planner's share of every collective call's host overhead. One benchmark per
// collective at a latency-bound, a middle and a bandwidth-bound size, for 2
// and 8 ranks. The `algo` label shows what was chosen, so a run also shows the
// rule's crossover points.
#include <benchmark/benchmark.h>

#include <string>

#include "algorithms/algorithm.h"
#include "planner/registry.h"

namespace lanes::micro {
namespace {

constexpr CollType kColls[] = {CollType::AllReduce, CollType::Broadcast,     CollType::Reduce,
                               CollType::AllGather, CollType::ReduceScatter, CollType::AlltoAll,
                               CollType::Gather,    CollType::Scatter};

void planSelect(benchmark::State& state, CollType coll) {
  const auto bytes = static_cast<size_t>(state.range(0));
  const auto nranks = static_cast<int>(state.range(1));
  const SelectionConfig config;  // the defaults: what an unset environment gives
  AlgoChoice choice{};
  for (auto _ : state) {
    choice = chooseHostAlgorithm(coll, bytes, nranks, config);
    benchmark::DoNotOptimize(choice);
  }
  state.SetLabel(std::string("algo=") + algoName(choice.algo));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

}  // namespace
}  // namespace lanes::micro

int main(int argc, char** argv) {
  using namespace lanes::micro;
  for (lanes::CollType coll : kColls) {
    benchmark::RegisterBenchmark((std::string("plan_select/") + lanes::collTypeName(coll)).c_str(),
                                 planSelect, coll)
        ->ArgsProduct({{8, 64 << 10, 256 << 20}, {2, 8}})
        ->ArgNames({"bytes", "ranks"});
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
