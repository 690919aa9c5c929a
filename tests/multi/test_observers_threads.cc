// The observers under concurrency (this test runs in the TSan stage): while
// three thread ranks run collectives, another thread keeps sending the
// process SIGUSR1 (dumps of every live communicator) and rendering the
// metrics (as the HTTP endpoint's thread does); every rank traces. The
// dumps, the exposition and the traces all read back whole and count what
// ran.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/observers.h"
#include "observe/flight_dump_format.h"
#include "observe/metrics.h"
#include "tests/multi/harness.h"

namespace lanes::test {
namespace {

constexpr int kRanks = 3;
constexpr int kCalls = 300;

std::string readAll(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool sigusr1Handled() {
  struct sigaction now {};
  return sigaction(SIGUSR1, nullptr, &now) == 0 && now.sa_handler != SIG_DFL &&
         now.sa_handler != SIG_IGN;
}

TEST(ObserversThreads, DumpsScrapesAndTracesWhileRanksRun) {
  std::string pattern = (std::filesystem::temp_directory_path() / "lanes-obs-XXXXXX").string();
  ASSERT_NE(mkdtemp(pattern.data()), nullptr);
  const std::string dir = pattern;
  setenv("LANES_FLIGHT_RECORDER_FILE", (dir + "/flight").c_str(), 1);
  setenv("LANES_TRACE_FILE", (dir + "/trace").c_str(), 1);
  setenv("LANES_METRICS", ("file=" + dir + "/metrics.prom,interval=0.1").c_str(), 1);

  std::atomic<bool> stop{false};
  std::atomic<int> signals{0}, scrapes{0};
  std::thread poker([&] {
    while (!stop.load()) {
      // Only once Lanes handles it: SIGUSR1's default would end the process.
      if (sigusr1Handled()) {
        kill(getpid(), SIGUSR1);
        ++signals;
      }
      if (!MetricsRegistry::process().exposition().empty()) ++scrapes;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  runThreads(kRanks, [](int rank, int n, const lanesUniqueId& id) {
    CommGuard comm(initComm(rank, n, id));
    std::vector<float> buf(256, 1.0f);
    for (int i = 0; i < kCalls; ++i) {
      RANK_CHECK_LANES(lanesAllReduce(buf.data(), buf.data(), buf.size(), lanesFloat32, lanesSum,
                                      comm.get(), nullptr),
                       comm.get());
      if (i % 10 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  const bool metrics = metricsOn();
  const std::string exposition = MetricsRegistry::process().exposition();
  stop = true;
  poker.join();
  unsetenv("LANES_FLIGHT_RECORDER_FILE");
  unsetenv("LANES_TRACE_FILE");
  unsetenv("LANES_METRICS");

  EXPECT_GT(signals.load(), 0) << "SIGUSR1 was never handled by Lanes";
  EXPECT_GT(scrapes.load(), 0);
  int dumps = 0, traces = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("flight.", 0) == 0 && name.ends_with(".json")) {
      FlightDump d;
      const Status s = parseFlightDump(readAll(e.path()), &d);
      EXPECT_TRUE(s.isOk()) << name << ": " << s.message();
      EXPECT_EQ(d.header.reason, "signal") << name;
      ++dumps;
    } else if (name.rfind("trace.", 0) == 0) {
      const auto events = nlohmann::json::parse(readAll(e.path()));  // closed whole at destroy
      size_t calls = 0;
      for (const auto& ev : events) calls += ev.at("ph") == "X" && ev.at("tid") == 1;
      EXPECT_EQ(calls, static_cast<size_t>(kCalls)) << name;
      ++traces;
    }
  }
  EXPECT_EQ(dumps, kRanks);
  EXPECT_EQ(traces, kRanks);
  // The process's metrics writer outlives the communicators (it runs for the
  // process's life) and may rename a fresh metrics.prom into the folder while
  // it is removed: try again until the folder is gone (its writes then fail).
  std::error_code gone;
  for (int i = 0; i < 100 && std::filesystem::exists(dir); ++i)
    std::filesystem::remove_all(dir, gone);
  EXPECT_FALSE(std::filesystem::exists(dir)) << gone.message();
  if (!metrics)
    GTEST_SKIP() << "LANES_METRICS was read before this test set it (run it alone, as ctest "
                    "does): the metrics part is unchecked";
  // Every rank counted its calls.
  size_t counted = 0;
  std::istringstream lines(exposition);
  for (std::string l; std::getline(lines, l);)
    if (l.rfind("lanes_calls_total{", 0) == 0 &&
        l.find("collective=\"allreduce\"") != std::string::npos)
      counted += std::stoul(l.substr(l.rfind(' ') + 1));
  EXPECT_EQ(counted, static_cast<size_t>(kRanks * kCalls)) << exposition;
}

}  // namespace
}  // namespace lanes::test
