// Writing a communicator's flight recorder (observe/flight_recorder.h) to a
// JSON file: on a timeout or failure or abort with an operation in flight or
// failed, and for every communicator when the process gets SIGUSR1. lanes-flight merges every
// rank's files (docs/observability.md).
#pragma once

#include <string>

struct lanesComm;

namespace lanes {

// The file of this rank and communicator:
// <LANES_FLIGHT_RECORDER_FILE, default /tmp/lanes-flight>.<comm id>.rank<R>.json
std::string flightDumpPath(const lanesComm* comm);
// Writes it (whole, then renamed over the last one) and says so at WARN;
// `reason` is "timeout", "failure", "abort" or "signal". Returns the path,
// "" when the recorder is off or the file could not be written (logged).
std::string dumpFlightRecord(lanesComm* comm, const char* reason);
// Whether an operation it holds is in flight (device work is asked first)
// or the newest one failed: what makes a failure or an abort worth a dump.
// A rank that was idle when a peer aborted or died has nothing to tell.
// Dumps wait for the communicator's set-up to end (lanesComm::observed).
bool flightHasUnfinished(lanesComm* comm);
// Makes SIGUSR1 dump every live communicator of this process, once per
// process, where SIGUSR1 still has its default action (which would kill
// the process): a program's own handler is left alone.
void armFlightSignal();

}  // namespace lanes
