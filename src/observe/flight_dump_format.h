// The flight recorder's dump: one JSON file per rank and communicator,
// written by the library (core/flight_dump.h) and read back by lanes-flight.
// docs/observability.md shows the format.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "observe/flight_recorder.h"

namespace lanes {

inline constexpr const char* kFlightDumpFormat = "lanes-flight-recorder";
inline constexpr int kFlightDumpVersion = 1;

// Who wrote a dump, when and why.
struct FlightDumpHeader {
  std::string commId;  // "0x..." (the bootstrap's communicator id; the same on every rank)
  std::string commName;
  int rank = -1;
  int nranks = 0;
  int cudaDev = -1;
  std::string host;
  int pid = 0;
  std::string reason;  // "timeout", "failure", "abort", "signal"
  std::string error;   // the communicator's failure, "" while healthy
  int64_t dumpedUs = 0;
  uint64_t capacity = 0;
  uint64_t issued = 0;  // operations begun; entries hold the newest `capacity`
};

// One FlightEntry as read back: the call's names are strings here.
struct FlightRecord {
  uint64_t id = 0;
  int64_t seq = -1;
  std::string name, datatype, redop;
  int32_t root = -1;
  uint64_t count = 0;
  uint32_t calls = 1;
  uint64_t bytes = 0;
  bool onDevice = false;
  FlightState state = FlightState::Running;
  std::string plan;
  int64_t issuedUs = 0, startedUs = 0, endedUs = 0;
  std::vector<int> waitingFor;
  // "allreduce(count 1024 float32 sum)": what ranks compare.
  std::string describeCall() const;
};

struct FlightDump {
  FlightDumpHeader header;
  std::vector<FlightRecord> records;  // oldest first
};

std::string flightDumpJson(const FlightDumpHeader& header, const std::vector<FlightEntry>& entries);
// Fails naming what is wrong (not JSON, another format or version, a field
// missing or of the wrong type).
Status parseFlightDump(const std::string& text, FlightDump* out);

}  // namespace lanes
