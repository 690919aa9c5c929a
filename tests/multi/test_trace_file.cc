// LANES_TRACE_FILE on 4 ranks: every rank writes its calls' stages, lanes-trace
// merges the files (one cut short, as a crashed process leaves it) into one
// valid trace with a process per rank and a track per stage, the ranks'
// clocks lined up on rank 0's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/multi/harness.h"

namespace lanes::test {
namespace {

constexpr int kRanks = 4;
constexpr int kAllReduces = 10;
constexpr int kBroadcasts = 5;

std::string readAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(TraceFile, RanksTracksLineUpInTheMergedTrace) {
  std::string pattern = (std::filesystem::temp_directory_path() / "lanes-trace-XXXXXX").string();
  ASSERT_NE(mkdtemp(pattern.data()), nullptr);
  const std::string dir = pattern;
  RunOptions options;
  options.env = {{"LANES_TRACE_FILE", dir + "/job"}};
  runForked(
      kRanks,
      [](int rank, int n, const lanesUniqueId& id) {
        CommGuard comm(initComm(rank, n, id));
        std::vector<float> buf(1024, 1.0f);
        for (int i = 0; i < kAllReduces; ++i)
          RANK_CHECK_LANES(lanesAllReduce(buf.data(), buf.data(), buf.size(), lanesFloat32,
                                          lanesSum, comm.get(), nullptr),
                           comm.get());
        for (int i = 0; i < kBroadcasts; ++i)
          RANK_CHECK_LANES(
              lanesBroadcast(buf.data(), buf.data(), 16, lanesFloat32, 0, comm.get(), nullptr),
              comm.get());
      },
      options);
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path().string());
  ASSERT_EQ(files.size(), static_cast<size_t>(kRanks));
  // One rank's file cut after its last whole event, as a crash leaves it.
  std::sort(files.begin(), files.end());
  std::string cut = readAll(files.back());
  cut = cut.substr(0, cut.rfind('}') + 1) + ",\n{\"ph\":\"X\",\"na";
  std::ofstream(files.back()) << cut;

  const std::string merged = dir + "/merged.json";
  const CommandResult r = runCommand({LANES_TRACE_PATH, "-o", merged, dir + "/job"}, {}, 60);
  ASSERT_TRUE(r.exited && r.exitCode == 0) << r.describe();
  const nlohmann::json trace = nlohmann::json::parse(readAll(merged));
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(trace.at("traceEvents").is_array());
  std::set<int> processes;
  std::map<int, std::set<int>> tracks;               // named tracks per rank
  std::map<std::pair<int, int>, int> stagesOf;       // (rank, track) -> X events
  std::map<int, std::map<int64_t, int64_t>> callAt;  // rank -> operation id -> start
  for (const auto& e : trace.at("traceEvents")) {
    const std::string ph = e.at("ph");
    const int pid = e.at("pid");
    if (ph == "M") {
      if (e.at("name") == "process_name") processes.insert(pid);
      if (e.at("name") == "thread_name") tracks[pid].insert(e.at("tid").get<int>());
      continue;
    }
    ASSERT_EQ(ph, "X") << e.dump();
    ASSERT_TRUE(e.at("ts").is_number_integer() && e.at("dur").is_number_integer()) << e.dump();
    EXPECT_GE(e.at("dur").get<int64_t>(), 0) << e.dump();
    const int tid = e.at("tid");
    ++stagesOf[{pid, tid}];
    if (tid == 1) callAt[pid][e.at("args").at("id")] = e.at("ts");
  }
  EXPECT_EQ(processes, (std::set<int>{0, 1, 2, 3}));
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_EQ(tracks[rank], (std::set<int>{1, 2, 3, 4})) << "rank " << rank;
    for (int tid = 1; tid <= 3; ++tid)
      EXPECT_EQ((stagesOf[{rank, tid}]), kAllReduces + kBroadcasts)
          << "rank " << rank << " track " << tid;
  }
  // Ranks meet in every all-reduce: on one clock, each starts its call #k
  // before any rank finishes #k+1, so the starts of #k lie within a few
  // calls of each other (generously: 200 ms on a loaded machine).
  for (int64_t op = 0; op < kAllReduces; ++op)
    for (int rank = 1; rank < kRanks; ++rank)
      EXPECT_LT(std::llabs(callAt[rank][op] - callAt[0][op]), 200'000)
          << "operation " << op << " on rank " << rank;
}

}  // namespace
}  // namespace lanes::test
