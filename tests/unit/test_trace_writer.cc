// The trace writer: a JSON array of Chrome trace events, the rank's process
// and track names first, each operation's stages on their tracks on rank 0's
// clock; and the clock offset taken from the ping-pong with the shortest
// round trip.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "observe/trace_writer.h"

namespace lanes::testing {
namespace {

TEST(TraceClock, TakesTheSampleWithTheShortestRoundTrip) {
  // Rank 0's clock is 1000 us ahead; the second sample's round trip is the shortest.
  const int64_t sent[] = {0, 100, 200, 300};
  const int64_t peer[] = {1100, 1104, 1260, 1500};
  const int64_t received[] = {200, 108, 280, 700};
  EXPECT_EQ(clockOffsetUs(sent, peer, received, 4), 1000);
  // A sample whose clock ran backwards is ignored; none usable: 0.
  const int64_t backwards[] = {-1, -1, -1, -1};
  EXPECT_EQ(clockOffsetUs(sent, peer, backwards, 4), 0);
}

TEST(TraceWriter, WritesStagesOnRankZerosClock) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("lanes-trace-unit-" + std::to_string(getpid()) + ".json"))
                               .string();
  {
    std::unique_ptr<TraceWriter> w;
    ASSERT_TRUE(TraceWriter::open(path, 2, "tp \"a\" · node pid 1", 500, &w).isOk());
    FlightEntry host;
    host.id = 7;
    host.seq = 7;
    host.call.name = "allreduce";
    host.call.datatype = "float32";
    host.bytes = 4096;
    host.issuedUs = 1000;
    host.startedUs = 1010;
    host.endedUs = 1100;
    host.state = FlightState::Completed;
    std::snprintf(host.plan.data(), host.plan.size(), "ring");
    w->add(host);
    FlightEntry device = host;
    device.id = 8;
    device.onDevice = true;
    device.startedUs = 1020;
    device.endedUs = 0;
    device.state = FlightState::Enqueued;
    std::snprintf(device.plan.data(), device.plan.size(), "staged");
    w->add(device);
    FlightEntry unstarted = host;  // failed before it started: its engine stage is left out
    unstarted.id = 9;
    unstarted.startedUs = 0;
    unstarted.state = FlightState::Failed;
    w->add(unstarted);
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove(path);
  const nlohmann::json events = nlohmann::json::parse(text.str());
  ASSERT_TRUE(events.is_array());
  std::map<int, std::string> threads;
  std::string process;
  std::vector<nlohmann::json> stages;
  for (const auto& e : events) {
    ASSERT_EQ(e.at("pid"), 2);
    if (e.at("ph") == "M" && e.at("name") == "thread_name")
      threads[e.at("tid")] = e.at("args").at("name");
    else if (e.at("ph") == "M" && e.at("name") == "process_name")
      process = e.at("args").at("name");
    else if (e.at("ph") == "X")
      stages.push_back(e);
  }
  EXPECT_EQ(process, "rank 2 · tp \"a\" · node pid 1");
  EXPECT_EQ(threads[TraceWriter::Calls], "calls");
  EXPECT_EQ(threads[TraceWriter::Engine], "host engine");
  ASSERT_EQ(stages.size(), 3u + 2u + 1u);
  EXPECT_EQ(stages[0].at("name"), "allreduce");
  EXPECT_EQ(stages[0].at("ts"), 1500);
  EXPECT_EQ(stages[0].at("dur"), 100);
  EXPECT_EQ(stages[0].at("args").at("plan"), "ring");
  EXPECT_EQ(stages[1].at("name"), "plan");
  EXPECT_EQ(stages[1].at("dur"), 10);
  EXPECT_EQ(stages[2].at("name"), "ring");
  EXPECT_EQ(stages[2].at("tid"), TraceWriter::Engine);
  EXPECT_EQ(stages[2].at("ts"), 1510);
  EXPECT_EQ(stages[3].at("dur"), 20);  // the device call: its enqueue
  EXPECT_EQ(stages[4].at("name"), "enqueue staged");
  EXPECT_EQ(stages[4].at("tid"), TraceWriter::Enqueue);
  EXPECT_EQ(stages[5].at("args").at("state"), "failed");
}

}  // namespace
}  // namespace lanes::testing
