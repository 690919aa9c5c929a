// lanes_micro_init: bootstrap + communicator init time against rank count.
// Ranks are threads of this process, each calling lanesCommInitRank with one
// shared unique id (as a multi-process job would, minus process start-up), then
// lanesCommDestroy. The reported time is from releasing the ranks together to
// the last rank's init returning; thread creation is outside it. destroy_us is
// the slowest rank's lanesCommDestroy, averaged over iterations.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "lanes/lanes.h"

namespace lanes::micro {
namespace {

using Clock = std::chrono::steady_clock;

struct RankRun {
  lanesResult_t result = lanesSuccess;
  std::string error;
  Clock::time_point initDone{};
  double destroySeconds = 0;
};

// One job of `nranks` thread ranks: init, line up, destroy. Returns false with
// *error set when any rank failed.
bool runJob(int nranks, double* initSeconds, double* destroySeconds, std::string* error) {
  lanesUniqueId id;
  if (lanesGetUniqueId(&id) != lanesSuccess) {
    *error = std::string("lanesGetUniqueId failed: ") + lanesGetLastError(nullptr);
    return false;
  }
  std::vector<RankRun> runs(static_cast<size_t>(nranks));
  std::latch ready(nranks);
  std::latch go(1);
  std::barrier lineUp(nranks);
  Clock::time_point start;
  {
    std::vector<std::jthread> ranks;
    for (int r = 0; r < nranks; ++r) {
      ranks.emplace_back([&, r] {
        RankRun& run = runs[static_cast<size_t>(r)];
        lanesConfig_t config = LANES_CONFIG_INITIALIZER;
        config.timeoutSeconds = 30;  // a broken bootstrap fails the benchmark, not hangs it
        config.commName = "micro-init";
        lanesComm_t comm = nullptr;
        ready.count_down();
        go.wait();
        run.result = lanesCommInitRankConfig(&comm, nranks, id, r, &config);
        run.initDone = Clock::now();
        if (run.result != lanesSuccess) run.error = lanesGetLastError(nullptr);
        lineUp.arrive_and_wait();  // destroy timed from a common start, like init
        if (comm != nullptr) {
          const auto t0 = Clock::now();
          lanesResult_t res = lanesCommDestroy(comm);
          run.destroySeconds = std::chrono::duration<double>(Clock::now() - t0).count();
          if (res != lanesSuccess && run.result == lanesSuccess) {
            run.result = res;
            run.error = std::string("lanesCommDestroy: ") + lanesGetLastError(nullptr);
          }
        }
      });
    }
    ready.wait();
    start = Clock::now();
    go.count_down();
  }  // jthreads join here
  Clock::time_point last = start;
  *destroySeconds = 0;
  for (int r = 0; r < nranks; ++r) {
    const RankRun& run = runs[static_cast<size_t>(r)];
    if (run.result != lanesSuccess) {
      *error = "rank " + std::to_string(r) + " of " + std::to_string(nranks) + ": " + run.error;
      return false;
    }
    last = std::max(last, run.initDone);
    *destroySeconds = std::max(*destroySeconds, run.destroySeconds);
  }
  *initSeconds = std::chrono::duration<double>(last - start).count();
  return true;
}

void commInit(benchmark::State& state) {
  const auto nranks = static_cast<int>(state.range(0));
  double destroyTotal = 0;
  for (auto _ : state) {
    double initSeconds = 0, destroySeconds = 0;
    std::string error;
    if (!runJob(nranks, &initSeconds, &destroySeconds, &error)) {
      state.SkipWithError(error.c_str());
      break;
    }
    state.SetIterationTime(initSeconds);
    destroyTotal += destroySeconds;
  }
  state.counters["destroy_us"] =
      benchmark::Counter(destroyTotal * 1e6, benchmark::Counter::kAvgIterations);
}

}  // namespace
}  // namespace lanes::micro

BENCHMARK(lanes::micro::commInit)
    ->Name("comm_init")
    ->ArgName("ranks")
    ->Arg(2)
    ->Arg(4)
    ->Arg(8)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
