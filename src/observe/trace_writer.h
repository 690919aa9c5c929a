// LANES_TRACE_FILE: the stages of every call of one communicator on this
// rank as Chrome/Perfetto trace events (JSON array format), on rank 0's
// clock so that the ranks' tracks line up once lanes-trace merges them.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "observe/flight_recorder.h"

namespace lanes {

class TraceWriter {
 public:
  // Opens `path` (replacing it) and writes the rank's track names.
  // `offsetUs` turns this rank's clock into rank 0's (estimated at init).
  static Status open(const std::string& path, int rank, const std::string& label, int64_t offsetUs,
                     std::unique_ptr<TraceWriter>* out);
  TraceWriter() = default;  // writes nothing; open() makes one that does
  ~TraceWriter();           // writes what is buffered and closes the array
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // The finished (or enqueued) operation's stages: the call, then on host
  // buffers its planning and the engine's run, on device buffers its enqueue.
  // The caller only queues the entry; a thread of the writer formats and
  // writes the events, off the calls' path.
  void add(const FlightEntry& e);

  // Tracks (thread ids under the rank's process id).
  enum Track : int { Calls = 1, Plan = 2, Engine = 3, Enqueue = 4 };

 private:
  void event(const char* name, Track track, int64_t beginUs, int64_t endUs,
             const std::string& args);
  void format(const FlightEntry& e);  // into buffer_ (the writer thread)
  void drain();                       // formats what is queued and writes it
  void run(std::stop_token stop);

  std::mutex mutex_;                  // guards queued_
  std::condition_variable_any wake_;  // a full queue, or the end
  std::vector<FlightEntry> queued_;
  FILE* file_ = nullptr;  // the writer thread's (and the destructor's once it ended)
  std::string buffer_;
  int rank_ = 0;
  int64_t offsetUs_ = 0;
  int owner_ = 0;        // the pid that started the writer thread
  std::jthread writer_;  // last: stops and joins before the rest goes
};

// Rank `rank`'s offset to rank 0's clock from ping-pong samples: the one
// with the shortest round trip, t0 - (t1 + t3) / 2 (rank 0's reading t0
// between this rank's send t1 and receive t3). Pure, for tests.
int64_t clockOffsetUs(const int64_t* sent, const int64_t* peer, const int64_t* received,
                      int samples);

}  // namespace lanes
