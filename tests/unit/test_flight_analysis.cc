// lanes-flight's reading of dumps: the rank that never called the operation
// the others wait in is named first, with its last call; a rank without a
// dump that others wait for is named; calls the ranks disagree on are found.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/lanes_flight_analysis.h"

namespace lanes::testing {
namespace {

FlightRecord record(uint64_t id, FlightState state, uint64_t count = 1024,
                    std::vector<int> waitingFor = {}) {
  FlightRecord r;
  r.id = id;
  r.seq = static_cast<int64_t>(id);
  r.name = "allreduce";
  r.datatype = "float32";
  r.redop = "sum";
  r.count = count;
  r.state = state;
  r.issuedUs = 1'000'000;
  r.endedUs = state == FlightState::Completed || state == FlightState::Failed ? 6'000'000 : 0;
  r.waitingFor = std::move(waitingFor);
  return r;
}

FlightDump dump(int rank, int nranks, std::vector<FlightRecord> records, const char* reason) {
  FlightDump d;
  d.header.commId = "0x0000000000000001";
  d.header.rank = rank;
  d.header.nranks = nranks;
  d.header.host = "node";
  d.header.pid = 100 + rank;
  d.header.reason = reason;
  d.header.dumpedUs = 7'000'000;
  d.header.capacity = 1024;
  d.header.issued = records.empty() ? 0 : records.back().id + 1;
  d.records = std::move(records);
  return d;
}

bool has(const std::vector<std::string>& lines, const std::string& text) {
  for (const std::string& l : lines)
    if (l.find(text) != std::string::npos) return true;
  return false;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

TEST(FlightAnalysis, NamesTheRankThatNeverCalledWhatOthersWaitIn) {
  const std::vector<FlightDump> dumps = {
      dump(0, 3, {record(0, FlightState::Completed), record(1, FlightState::Failed, 1024, {2})},
           "timeout"),
      dump(1, 3, {record(0, FlightState::Completed), record(1, FlightState::Failed, 1024, {2})},
           "timeout"),
      dump(2, 3, {record(0, FlightState::Completed)}, "signal"),
  };
  const auto findings = analyzeFlightDumps(dumps);
  ASSERT_EQ(findings.size(), 1u);
  const auto& v = findings[0].verdicts;
  ASSERT_FALSE(v.empty());
  // The cause comes first.
  EXPECT_NE(v[0].find("rank 2 never called operation #1 (allreduce(count 1024 float32 sum)) "
                      "that ranks 0 and 1 wait in: its last operation is #0"),
            std::string::npos)
      << joined(v);
  EXPECT_TRUE(has(v, "ranks 0 and 1 are in operation #1")) << joined(v);
  EXPECT_TRUE(has(v, "waiting for rank 2")) << joined(v);
  EXPECT_EQ(findings[0].rankLines.size(), 3u);
  EXPECT_TRUE(has(findings[0].rankLines, "rank 0 (node pid 100, dumped on timeout)"));
  EXPECT_TRUE(has(findings[0].rankLines, "failed after 5.0 s, waiting for rank 2"));
}

TEST(FlightAnalysis, NamesARankWithoutADumpThatOthersWaitFor) {
  const std::vector<FlightDump> dumps = {
      dump(0, 2, {record(0, FlightState::Failed, 8, {1})}, "timeout"),
  };
  const auto v = analyzeFlightDumps(dumps).at(0).verdicts;
  EXPECT_TRUE(has(v, "no dump from rank 1, which rank 0 waits for in operation #0")) << joined(v);
}

TEST(FlightAnalysis, FindsTheFirstCallTheRanksDisagreeOn) {
  const std::vector<FlightDump> dumps = {
      dump(0, 2, {record(0, FlightState::Completed), record(1, FlightState::Running, 1024)},
           "signal"),
      dump(1, 2, {record(0, FlightState::Completed), record(1, FlightState::Running, 2048)},
           "signal"),
  };
  const auto v = analyzeFlightDumps(dumps).at(0).verdicts;
  EXPECT_TRUE(has(v,
                  "ranks disagree on operation #1: rank 0 called allreduce(count 1024 "
                  "float32 sum), rank 1 called allreduce(count 2048 float32 sum)"))
      << joined(v);
}

TEST(FlightAnalysis, SendsAndReceivesAreNotADisagreement) {
  FlightRecord send = record(0, FlightState::Completed);
  send.name = "send";
  send.redop = "";
  send.root = 1;
  FlightRecord recv = send;
  recv.name = "recv";
  recv.root = 0;
  const auto v = analyzeFlightDumps({dump(0, 2, {send}, "signal"), dump(1, 2, {recv}, "signal")})
                     .at(0)
                     .verdicts;
  EXPECT_FALSE(has(v, "disagree")) << joined(v);
  EXPECT_TRUE(has(v, "no operation in flight")) << joined(v);
}

TEST(FlightAnalysis, AFailureTheRankLivedThroughIsNotWhereItStopped) {
  // #0 refused (LANES_CHECK_MISMATCH), #1 completed: nothing is stuck.
  const auto v =
      analyzeFlightDumps(
          {dump(0, 1, {record(0, FlightState::Failed), record(1, FlightState::Completed)},
                "signal")})
          .at(0)
          .verdicts;
  EXPECT_TRUE(has(v, "no operation in flight")) << joined(v);
  // The newest failed: that is where it stopped.
  const auto w =
      analyzeFlightDumps(
          {dump(0, 1, {record(0, FlightState::Completed), record(1, FlightState::Failed)},
                "failure")})
          .at(0)
          .verdicts;
  EXPECT_TRUE(has(w, "rank 0 is in operation #1")) << joined(w);
}

TEST(FlightAnalysis, TakesEachRanksNewestDumpAndKeepsCommunicatorsApart) {
  FlightDump older = dump(0, 1, {record(0, FlightState::Running)}, "signal");
  older.header.dumpedUs = 1;
  FlightDump newer = dump(0, 1, {record(0, FlightState::Completed)}, "signal");
  FlightDump other = dump(0, 1, {record(0, FlightState::Running)}, "signal");
  other.header.commId = "0x0000000000000002";
  const auto findings = analyzeFlightDumps({older, newer, other});
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_TRUE(has(findings[0].verdicts, "no operation in flight")) << joined(findings[0].verdicts);
  EXPECT_TRUE(has(findings[1].verdicts, "rank 0 is in operation #0"))
      << joined(findings[1].verdicts);
}

}  // namespace
}  // namespace lanes::testing
