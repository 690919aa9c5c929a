// lanes-flight: reads the flight-recorder dumps of a job's ranks and says
// which rank stopped where and which call the ranks disagree on
// (docs/observability.md).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tools/dump_files.h"
#include "tools/lanes_flight_analysis.h"

namespace {

constexpr const char* kUsage =
    "usage: lanes-flight PATH...\n"
    "\n"
    "Reads Lanes flight-recorder dumps (one JSON file per rank and communicator, written\n"
    "on a timeout, a failure, an abort, or SIGUSR1 to "
    "LANES_FLIGHT_RECORDER_FILE.<comm>.rank<R>.json,\n"
    "default /tmp/lanes-flight...) and prints, per communicator, which rank stopped where,\n"
    "whom the others wait for, and the first call the ranks disagree on.\n"
    "\n"
    "A PATH is a dump file, a folder (its *.json dumps), or a prefix as in\n"
    "LANES_FLIGHT_RECORDER_FILE (every PREFIX.*.json).\n"
    "\n"
    "Exit status: 0 read and analysed, 1 a file could not be read or is not a dump, 2 no dump "
    "found.\n";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    paths.push_back(argv[i]);
  }
  if (paths.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::vector<lanes::FlightDump> dumps;
  int status = 0;
  for (const std::string& arg : paths) {
    const auto files = lanes::dumpFilesAt(arg);
    if (files.empty()) std::fprintf(stderr, "lanes-flight: no dump at %s\n", arg.c_str());
    for (const auto& file : files) {
      std::string text;
      lanes::FlightDump dump;
      if (!lanes::readWholeFile(file, &text)) {
        std::fprintf(stderr, "lanes-flight: cannot read %s\n", file.c_str());
        status = 1;
        continue;
      }
      if (lanes::Status s = lanes::parseFlightDump(text, &dump); !s) {
        std::fprintf(stderr, "lanes-flight: %s: %s\n", file.c_str(), s.message().c_str());
        status = 1;
        continue;
      }
      dumps.push_back(std::move(dump));
    }
  }
  if (dumps.empty()) {
    std::fputs("lanes-flight: no flight-recorder dump read\n", stderr);
    return status != 0 ? status : 2;
  }
  std::fputs(lanes::formatFindings(lanes::analyzeFlightDumps(dumps), dumps).c_str(), stdout);
  return status;
}
