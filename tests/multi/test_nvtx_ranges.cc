// NVTX ranges, seen by an NVTX tool (tests/observe/nvtx_recorder.cc, loaded
// as nsys loads its own: NVTX_INJECTION64_PATH): every call of a 2-rank job
// pushes a range in the "Lanes" domain naming the call, its bytes and the
// communicator, the host engine's stage nests inside naming the schedule, and
// every push is popped on its thread. (Without a tool nothing is pushed:
// nvtxAttached() reads NVTX_INJECTION64_PATH; bench/observe/overhead.py
// measures what that leaves.)
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "tests/multi/harness.h"

namespace lanes::test {
namespace {

// Every process's file (PREFIX.<pid>), removed once read.
std::vector<std::string> lines(const std::string& prefix) {
  std::vector<std::string> out;
  const std::filesystem::path p(prefix);
  for (const auto& e : std::filesystem::directory_iterator(p.parent_path())) {
    if (e.path().filename().string().rfind(p.filename().string() + ".", 0) != 0) continue;
    std::ifstream in(e.path());
    for (std::string l; std::getline(in, l);) out.push_back(l);
    std::filesystem::remove(e.path());
  }
  return out;
}

size_t count(const std::vector<std::string>& ls, const std::string& text) {
  size_t n = 0;
  for (const auto& l : ls) n += l.find(text) != std::string::npos;
  return n;
}

TEST(NvtxRanges, AToolSeesEveryCallAndItsStage) {
  if (std::string(LANES_NVTX_RECORDER).empty())
    GTEST_SKIP() << "this build has no NVTX header (the CUDA toolkit's nvtx3): no ranges to see";
  const std::string record =
      (std::filesystem::temp_directory_path() / ("lanes-nvtx-" + std::to_string(getpid())))
          .string();
  const CommandResult run = runCommand(
      {LANES_RUN_PATH, "-n", "2", LANES_PERF_PATH, "-b", "4K", "-e", "4K", "-w", "1", "-n", "7",
       "-c", "0"},
      {{"NVTX_INJECTION64_PATH", LANES_NVTX_RECORDER}, {"LANES_NVTX_RECORD_FILE", record}}, 120);
  ASSERT_TRUE(run.exited && run.exitCode == 0) << run.describe();
  const auto ls = lines(record);
  ASSERT_FALSE(ls.empty()) << "the tool recorded nothing";
  // Warm-up 1 + 7 timed calls, out of place and in place, on each rank;
  // each call's range names its plan (a host algorithm), as the engine's
  // range inside it does.
  for (int rank = 0; rank < 2; ++rank) {
    const std::regex call(" 4096 allreduce 4096 B float32 sum on ([a-z_]+) · rank " +
                          std::to_string(rank) + " of 2$");
    size_t calls = 0;
    for (const auto& l : ls) {
      std::smatch m;
      if (!std::regex_search(l, m, call)) continue;
      ++calls;
      AlgoId algo;
      EXPECT_TRUE(parseAlgoName(m[1].str().c_str(), &algo)) << l;
    }
    EXPECT_GE(calls, 16u) << "rank " << rank << "'s calls\n" << ls.front();
  }
  EXPECT_GE(count(ls, " run allreduce/"), 32u);
  // Pushes and pops pair up on every thread, and each pop closes a push.
  std::map<std::string, int> depth;
  for (const auto& l : ls) {
    std::istringstream in(l);
    std::string op, domain, thread;
    in >> op >> domain >> thread;
    EXPECT_EQ(domain, "Lanes") << l;
    depth[thread] += op == "push" ? 1 : -1;
    EXPECT_GE(depth[thread], 0) << "a pop without a push: " << l;
  }
  for (const auto& [thread, d] : depth) EXPECT_EQ(d, 0) << "thread " << thread;
}

}  // namespace
}  // namespace lanes::test
