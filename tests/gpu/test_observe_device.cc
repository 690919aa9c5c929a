// What the observers see of device calls: the flight recorder marks each
// completed once its stream passed it (the completion markers), with the
// device path that served it; an NVTX tool sees the call, its enqueue on
// the path, and the staged path's stages.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/flight_dump.h"
#include "observe/flight_dump_format.h"
#include "tests/gpu/gpu_harness.h"

namespace lanes::test {
namespace {

constexpr int kLarge = 3;  // 4 MiB all-reduces
constexpr int kSmall = 3;  // 64 B all-reduces

TEST(FlightRecorderGpu, DeviceCallsCompleteOnceTheirStreamPassed) {
  GPU_SKIP_UNLESS_GPU_HERE();
  const std::string prefix =
      (std::filesystem::temp_directory_path() / ("lanes-flight-gpu-" + std::to_string(getpid())))
          .string();
  setenv("LANES_FLIGHT_RECORDER_FILE", prefix.c_str(), 1);
  runGpuThreads(2, [](GpuRank& self) {
    DeviceBuffer large((size_t{1} << 20) * sizeof(float), self.stream);
    DeviceBuffer small(16 * sizeof(float), self.stream);
    for (int i = 0; i < kLarge; ++i)
      GPU_CHECK_LANES(lanesAllReduce(large.data(), large.data(), size_t{1} << 20, lanesFloat32,
                                     lanesSum, self.comm, self.stream),
                      self.comm);
    for (int i = 0; i < kSmall; ++i)
      GPU_CHECK_LANES(lanesAllReduce(small.data(), small.data(), 16, lanesFloat32, lanesSum,
                                     self.comm, self.stream),
                      self.comm);
    syncStream(self.stream);
    const std::string path = dumpFlightRecord(self.comm, "signal");
    GPU_CHECK(!path.empty(), "no dump written");
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    std::filesystem::remove(path);
    FlightDump dump;
    const Status parsed = parseFlightDump(text.str(), &dump);
    GPU_CHECK(parsed.isOk(), "%s", parsed.message().c_str());
    GPU_CHECK(dump.records.size() >= kLarge + kSmall, "%zu entries", dump.records.size());
    const size_t first = dump.records.size() - (kLarge + kSmall);
    for (size_t i = first; i < dump.records.size(); ++i) {
      const FlightRecord& r = dump.records[i];
      const uint64_t bytes = i - first < kLarge ? (uint64_t{4} << 20) : 64;
      GPU_CHECK(r.onDevice && r.name == "allreduce" && r.bytes == bytes,
                "entry %zu: %s of %llu bytes", i, r.describeCall().c_str(),
                static_cast<unsigned long long>(r.bytes));
      GPU_CHECK(r.state == FlightState::Completed, "entry %zu (%s) is %s after the stream passed",
                i, r.describeCall().c_str(), flightStateName(r.state));
      GPU_CHECK(!r.plan.empty(), "entry %zu names no path", i);
      GPU_CHECK(r.startedUs >= r.issuedUs && r.endedUs >= r.startedUs, "entry %zu's times", i);
    }
  });
  unsetenv("LANES_FLIGHT_RECORDER_FILE");
}

TEST(NvtxRangesGpu, AToolSeesTheStagedPathsStages) {
  if (std::string(LANES_NVTX_RECORDER).empty()) GTEST_SKIP() << "this build has no NVTX header";
  if (gpusVisibleFromChild() <= 0) GTEST_SKIP() << kNoGpu;
  // The perf tool's ranks are threads of its process: this one stays free of CUDA.
  const std::string record =
      (std::filesystem::temp_directory_path() / ("lanes-nvtx-gpu-" + std::to_string(getpid())))
          .string();
  const CommandResult run = runCommand({LANES_ALL_REDUCE_PERF, "-t", "2", "--memory", "device",
                                        "-b", "8M", "-e", "8M", "-n", "3", "-w", "1", "-c", "0"},
                                       {{"NVTX_INJECTION64_PATH", LANES_NVTX_RECORDER},
                                        {"LANES_NVTX_RECORD_FILE", record},
                                        {"LANES_PROTO", "^ll,shared_context"}},
                                       180);
  ASSERT_TRUE(run.exited && run.exitCode == 0) << run.describe();
  std::vector<std::string> lines;  // the tool's file of the perf tool's process
  for (const auto& e :
       std::filesystem::directory_iterator(std::filesystem::temp_directory_path())) {
    const std::string name = e.path().string();
    if (name.rfind(record + ".", 0) != 0) continue;
    std::ifstream in(e.path());
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    std::filesystem::remove(e.path());
  }
  auto count = [&](const std::string& text) {
    size_t n = 0;
    for (const auto& l : lines) n += l.find(text) != std::string::npos;
    return n;
  };
  ASSERT_FALSE(lines.empty()) << "the tool recorded nothing";
  EXPECT_GE(count("allreduce 8388608 B float32 sum on staged · "), 8u);
  EXPECT_GE(count(" enqueue staged"), 8u);
  for (const char* stage : {" download", " upload pieces", " reduce", " wait for peers"})
    EXPECT_GE(count(stage), 8u) << stage;
}

}  // namespace
}  // namespace lanes::test
