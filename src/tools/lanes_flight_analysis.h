// lanes-flight's reading of a job's flight-recorder dumps: per communicator,
// which rank stopped where, whom the others wait for, and the first call the
// ranks disagree on. Pure, for tests.
#pragma once

#include <string>
#include <vector>

#include "observe/flight_dump_format.h"

namespace lanes {

struct FlightFinding {
  std::string commId;
  // One sentence each, causes first: ranks that never called the operation
  // the others are in, ranks without a dump that others wait for, calls the
  // ranks disagree on; then who waits in what.
  std::vector<std::string> verdicts;
  std::vector<std::string> rankLines;  // "rank 0 (host pid 12, timeout): ..."
};

// Groups `dumps` by communicator (several dumps of one rank: the newest).
std::vector<FlightFinding> analyzeFlightDumps(const std::vector<FlightDump>& dumps);
// The findings as lanes-flight prints them.
std::string formatFindings(const std::vector<FlightFinding>& findings,
                           const std::vector<FlightDump>& dumps);

}  // namespace lanes
