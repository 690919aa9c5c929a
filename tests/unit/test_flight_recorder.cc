// The flight recorder: a ring of the newest operations, each with its plan,
// state, times and the peers a failed one waited for; device entries settled
// by their completion markers; dumps that read back as written.
#include <gtest/gtest.h>

#include <string>

#include "observe/flight_dump_format.h"
#include "observe/flight_recorder.h"

namespace lanes::testing {
namespace {

FlightCall allreduce(uint64_t count) {
  FlightCall c;
  c.name = "allreduce";
  c.datatype = "float32";
  c.redop = "sum";
  c.count = count;
  return c;
}

TEST(FlightRecorder, OffRecordsNothing) {
  FlightRecorder off(0);
  EXPECT_FALSE(off.on());
  off.begin(allreduce(1), 1, 4, false);
  off.notePlan("ring");
  EXPECT_TRUE(off.snapshot().empty());
  EXPECT_EQ(off.issued(), 0u);
}

TEST(FlightRecorder, KeepsTheNewestOperationsInIssueOrder) {
  FlightRecorder rec(3);
  for (uint64_t i = 0; i < 5; ++i) {
    const uint64_t id = rec.begin(allreduce(i), 1, 4 * i, false);
    EXPECT_EQ(id, i);
    rec.setSeq(id, static_cast<int64_t>(10 + i));
    rec.finished(id, true);
  }
  const auto entries = rec.snapshot();
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(rec.issued(), 5u);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(entries[k].id, 2 + k);
    EXPECT_EQ(entries[k].seq, static_cast<int64_t>(12 + k));
    EXPECT_EQ(entries[k].call.count, 2 + k);
    EXPECT_EQ(entries[k].state, FlightState::Completed);
    EXPECT_GE(entries[k].endedUs, entries[k].issuedUs);
  }
  // An update for an overwritten entry changes nothing.
  rec.finished(0, false);
  rec.setSeq(1, 99);
  for (const FlightEntry& e : rec.snapshot()) {
    EXPECT_EQ(e.state, FlightState::Completed);
    EXPECT_NE(e.seq, 99);
  }
}

TEST(FlightRecorder, PlansOfAGroupAreJoinedOnce) {
  FlightRecorder rec(4);
  rec.begin(allreduce(8), 3, 96, false);
  rec.notePlan("ring");
  rec.notePlan("ring");
  rec.notePlan("p2p");
  rec.notePlan("ring");
  const auto e = rec.snapshot().at(0);
  EXPECT_STREQ(e.plan.data(), "ring+p2p");
  EXPECT_EQ(e.calls, 3u);
  EXPECT_EQ(e.bytes, 96u);
  // A plan whose name begins another's is still its own part.
  rec.begin(allreduce(8), 2, 64, false);
  rec.notePlan("staged/ll");
  rec.notePlan("staged");
  rec.notePlan("ll");
  rec.notePlan("staged");
  EXPECT_STREQ(rec.snapshot().back().plan.data(), "staged/ll+staged+ll");
  rec.begin(allreduce(8), 3, 64, false);
  rec.notePlan("staged");
  rec.notePlan("ll_pairs");
  rec.notePlan("ll");  // "+ll" begins "+ll_pairs", and is still a plan of its own
  EXPECT_STREQ(rec.snapshot().back().plan.data(), "staged+ll_pairs+ll");
  // Too long a plan is cut, NUL-terminated.
  rec.begin(allreduce(8), 1, 32, false);
  rec.notePlan(std::string(200, 'x'));
  EXPECT_EQ(std::string(rec.snapshot().back().plan.data()).size(), kFlightPlanChars - 1);
}

TEST(FlightRecorder, AFailureKeepsThePeersItWaitedFor) {
  FlightRecorder rec(2);
  const uint64_t id = rec.begin(allreduce(8), 1, 32, false);
  rec.started(id);
  const int peers[] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  rec.finished(id, false, peers);
  const auto e = rec.snapshot().at(0);
  EXPECT_EQ(e.state, FlightState::Failed);
  ASSERT_EQ(e.waitingCount, kFlightWaitingPeers);
  for (size_t i = 0; i < kFlightWaitingPeers; ++i) EXPECT_EQ(e.waitingFor[i], peers[i]);
  EXPECT_GT(e.startedUs, 0);
}

TEST(FlightRecorder, DeviceEntriesSettleByTheirMarkersAndTheirStreamsOrder) {
  constexpr uint64_t kStream = 0x1000, kOther = 0x2000;
  FlightRecorder rec(8);
  const uint64_t a = rec.begin(allreduce(1), 1, 4, true);
  rec.enqueued(a, 0, false, kStream);
  const uint64_t b = rec.begin(allreduce(2), 1, 8, true);
  rec.enqueued(b, 1, false, kStream);
  const uint64_t c = rec.begin(allreduce(3), 1, 12, true);
  rec.enqueued(c, -1, true, kStream);  // captured into a graph: no marker
  rec.settleMarkers([](int32_t marker) { return marker == 0; });
  auto entries = rec.snapshot();
  EXPECT_EQ(entries[0].state, FlightState::Completed);
  EXPECT_GT(entries[0].endedUs, 0);
  EXPECT_EQ(entries[1].state, FlightState::Enqueued);
  EXPECT_EQ(entries[2].state, FlightState::Captured);
  // Marker 1 taken again while b is pending: b is settled by its stream's
  // order once the newer entry passes.
  const uint64_t d = rec.begin(allreduce(4), 1, 16, true);
  rec.enqueued(d, 1, false, kStream);
  const uint64_t e = rec.begin(allreduce(5), 1, 20, true);
  rec.enqueued(e, 0, false, kOther);
  rec.settleMarkers([](int32_t marker) { return marker == 1; });
  entries = rec.snapshot();
  EXPECT_EQ(entries[1].state, FlightState::Completed) << "b, before d on its stream";
  EXPECT_EQ(entries[3].state, FlightState::Completed) << "d";
  EXPECT_EQ(entries[4].state, FlightState::Enqueued) << "e, on another stream";
  // Nothing passed: nothing changes.
  rec.settleMarkers([](int32_t) { return false; });
  EXPECT_EQ(rec.snapshot()[4].state, FlightState::Enqueued);
}

TEST(FlightDump, ReadsBackWhatWasWritten) {
  FlightRecorder rec(4);
  const uint64_t id = rec.begin(allreduce(1024), 2, 8192, false);
  rec.setSeq(id, 7);
  rec.notePlan("ring");
  const int peers[] = {2};
  rec.finished(id, false, peers);
  FlightCall send;
  send.name = "send";
  send.datatype = "int8";
  send.root = 3;
  send.count = 5;
  rec.begin(send, 1, 5, true);
  FlightDumpHeader h;
  h.commId = "0x00000000000000ab";
  h.commName = "tp \"group\" \xff";  // quotes and a byte that is not UTF-8
  h.rank = 1;
  h.nranks = 4;
  h.host = "node7";
  h.pid = 42;
  h.reason = "timeout";
  h.error = "allreduce #7 timed out";
  h.dumpedUs = 123;
  h.capacity = 4;
  h.issued = 2;
  FlightDump d;
  ASSERT_TRUE(parseFlightDump(flightDumpJson(h, rec.snapshot()), &d).isOk());
  EXPECT_EQ(d.header.commId, h.commId);
  EXPECT_EQ(d.header.commName.substr(0, 11), "tp \"group\" ");
  EXPECT_EQ(d.header.rank, 1);
  EXPECT_EQ(d.header.nranks, 4);
  EXPECT_EQ(d.header.reason, "timeout");
  EXPECT_EQ(d.header.error, h.error);
  ASSERT_EQ(d.records.size(), 2u);
  EXPECT_EQ(d.records[0].seq, 7);
  EXPECT_EQ(d.records[0].state, FlightState::Failed);
  EXPECT_EQ(d.records[0].plan, "ring");
  EXPECT_EQ(d.records[0].waitingFor, std::vector<int>{2});
  EXPECT_EQ(d.records[0].describeCall(),
            "allreduce(count 1024 float32 sum) and 1 more in its group");
  EXPECT_EQ(d.records[1].describeCall(), "send(count 5 int8 to rank 3)");
  EXPECT_TRUE(d.records[1].onDevice);
  EXPECT_EQ(d.records[1].state, FlightState::Enqueued);
}

TEST(FlightDump, RefusesWhatIsNotADumpNamingWhy) {
  FlightDump d;
  Status s = parseFlightDump("not json", &d);
  EXPECT_EQ(s.code(), lanesInvalidArgument);
  EXPECT_NE(s.message().find("malformed"), std::string::npos);
  s = parseFlightDump(R"({"format": "something-else"})", &d);
  EXPECT_NE(s.message().find("not a Lanes flight-recorder dump"), std::string::npos) << s.message();
  s = parseFlightDump(R"({"format": "lanes-flight-recorder", "version": 99})", &d);
  EXPECT_NE(s.message().find("version 99"), std::string::npos) << s.message();
  s = parseFlightDump(R"({"format": "lanes-flight-recorder", "version": 1, "comm": {}})", &d);
  EXPECT_NE(s.message().find("malformed"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace lanes::testing
