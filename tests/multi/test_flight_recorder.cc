// The flight recorder in a hung job: a rank skips an all-reduce, the others
// time out and dump, the skipper dumps on SIGUSR1, and lanes-flight names
// the rank that never called the operation and what it did last. An abort
// of an idle communicator writes nothing; an abort in flight does.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/multi/harness.h"

namespace lanes::test {
namespace {

constexpr size_t kCount = 1024;

// A folder of its own under the system's temporary folder, removed after.
struct TempDir {
  std::string path;
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "lanes-flight-XXXXXX").string();
    path = mkdtemp(pattern.data()) ? pattern : "";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

std::vector<std::string> dumpsIn(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".json") out.push_back(e.path().filename().string());
  return out;
}

lanesComm_t initWithTimeout(int rank, int n, const lanesUniqueId& id, int timeout) {
  lanesConfig_t config = LANES_CONFIG_INITIALIZER;
  config.timeoutSeconds = timeout;
  lanesComm_t comm = nullptr;
  RANK_CHECK_LANES(lanesCommInitRankConfig(&comm, n, id, rank, &config), comm);
  return comm;
}

bool waitForFileWithSuffix(const std::string& dir, const std::string& suffix, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    for (const std::string& f : dumpsIn(dir))
      if (f.ends_with(suffix)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

TEST(FlightRecorder, LanesFlightNamesTheRankThatNeverCalled) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  SharedCounter timedOut;
  RunOptions options;
  options.env = {{"LANES_FLIGHT_RECORDER_FILE", dir.path + "/job"}};
  runForked(
      3,
      [&](int rank, int n, const lanesUniqueId& id) {
        CommGuard comm(initWithTimeout(rank, n, id, 3));
        std::vector<float> buf(kCount, 1.0f);
        RANK_CHECK_LANES(lanesAllReduce(buf.data(), buf.data(), kCount, lanesFloat32, lanesSum,
                                        comm.get(), nullptr),
                         comm.get());
        if (rank == 2) {
          RANK_CHECK(timedOut.waitFor(n - 1, 120), "the waiting ranks never reported");
          // A healthy rank dumps when asked, as an operator would ask it.
          RANK_CHECK(kill(getpid(), SIGUSR1) == 0, "kill: %s", std::strerror(errno));
          RANK_CHECK(waitForFileWithSuffix(dir.path, ".rank2.json", 30),
                     "SIGUSR1 wrote no dump for rank 2");
          return;
        }
        const lanesResult_t res = lanesAllReduce(buf.data(), buf.data(), kCount, lanesFloat32,
                                                 lanesSum, comm.get(), nullptr);
        RANK_CHECK(res == lanesTimeout, "allreduce #1 returned %d, expected lanesTimeout",
                   static_cast<int>(res));
        RANK_CHECK(waitForFileWithSuffix(dir.path, ".rank" + std::to_string(rank) + ".json", 10),
                   "the timeout wrote no dump for rank %d", rank);
        timedOut.arrive();
      },
      options);
  ASSERT_EQ(dumpsIn(dir.path).size(), 3u);
  const CommandResult flight = runCommand({LANES_FLIGHT_PATH, dir.path + "/job"}, {}, 60);
  ASSERT_TRUE(flight.exited && flight.exitCode == 0) << flight.describe();
  const std::string& out = flight.output;
  EXPECT_NE(out.find("3 ranks, dumps from 3"), std::string::npos) << out;
  EXPECT_NE(out.find("* rank 2 never called operation #1 (allreduce(count 1024 float32 sum)) "
                     "that ranks 0 and 1 wait in: its last operation is #0 "
                     "allreduce(count 1024 float32 sum), completed"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("ranks 0 and 1 are in operation #1 (allreduce(count 1024 float32 sum)), "
                     "waiting for rank 2"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("dumped on timeout"), std::string::npos) << out;
  EXPECT_NE(out.find("rank 2 ("), std::string::npos) << out;
  EXPECT_NE(out.find("dumped on signal"), std::string::npos) << out;
}

// lanes-run's --timeout ends a hung job: before SIGTERM it asks every rank
// for its dump (SIGUSR1), so lanes-flight reads all of them, the rank that
// stopped included, though no rank timed out itself.
TEST(FlightRecorder, LanesRunAsksAHungJobForItsDumps) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const CommandResult run =
      runCommand({LANES_RUN_PATH, "-n", "3", "--timeout", "8", LANES_HANG_JOB, "1"},
                 {{"LANES_FLIGHT_RECORDER_FILE", dir.path + "/job"}, {"LANES_TIMEOUT", "600"}}, 90);
  ASSERT_TRUE(run.exited && run.exitCode == 124) << run.describe();
  EXPECT_NE(run.output.find("asking rank(s) 0, 1, 2 for their flight-recorder dumps (SIGUSR1)"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("lanes-flight " + dir.path + "/job"), std::string::npos) << run.output;
  ASSERT_EQ(dumpsIn(dir.path).size(), 3u) << run.output;
  const CommandResult flight = runCommand({LANES_FLIGHT_PATH, dir.path + "/job"}, {}, 60);
  ASSERT_TRUE(flight.exited && flight.exitCode == 0) << flight.describe();
  EXPECT_NE(flight.output.find("* rank 1 never called operation #1 (allreduce(count 1024 "
                               "float32 sum)) that ranks 0 and 2 wait in"),
            std::string::npos)
      << flight.output;
  EXPECT_NE(flight.output.find("dumped on signal"), std::string::npos) << flight.output;
}

TEST(FlightRecorder, AnIdleAbortWritesNothingAndLanesFlightSaysSo) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  SharedCounter finished;
  RunOptions options;
  options.env = {{"LANES_FLIGHT_RECORDER_FILE", dir.path + "/job"}};
  runForked(
      2,
      [&](int rank, int n, const lanesUniqueId& id) {
        lanesComm_t comm = initWithTimeout(rank, n, id, 10);
        std::vector<float> buf(kCount, 1.0f);
        RANK_CHECK_LANES(
            lanesAllReduce(buf.data(), buf.data(), kCount, lanesFloat32, lanesSum, comm, nullptr),
            comm);
        // Both calls are over before either rank aborts (the first abort
        // fails the other's communicator, which is idle: nothing to dump).
        finished.arrive();
        RANK_CHECK(finished.waitFor(n, 60), "the other rank never finished its call");
        RANK_CHECK_LANES(lanesCommAbort(comm), nullptr);
      },
      options);
  EXPECT_TRUE(dumpsIn(dir.path).empty());
  const CommandResult flight = runCommand({LANES_FLIGHT_PATH, dir.path + "/job"}, {}, 60);
  EXPECT_TRUE(flight.exited && flight.exitCode == 2) << flight.describe();
  EXPECT_NE(flight.output.find("no flight-recorder dump read"), std::string::npos) << flight.output;
}

TEST(FlightRecorder, OffWritesNothingEvenOnATimeout) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  SharedCounter done;
  RunOptions options;
  options.env = {{"LANES_FLIGHT_RECORDER_FILE", dir.path + "/job"}, {"LANES_FLIGHT_RECORDER", "0"}};
  runForked(
      2,
      [&](int rank, int n, const lanesUniqueId& id) {
        CommGuard comm(initWithTimeout(rank, n, id, 2));
        std::vector<float> buf(kCount, 1.0f);
        if (rank == 0) {
          const lanesResult_t res = lanesAllReduce(buf.data(), buf.data(), kCount, lanesFloat32,
                                                   lanesSum, comm.get(), nullptr);
          RANK_CHECK(res == lanesTimeout, "returned %d", static_cast<int>(res));
        }
        done.arrive();
        RANK_CHECK(done.waitFor(n, 60), "the other rank never reported");
      },
      options);
  EXPECT_TRUE(dumpsIn(dir.path).empty());
}

}  // namespace
}  // namespace lanes::test
