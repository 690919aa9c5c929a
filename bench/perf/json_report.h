// -J FILE: the run as JSON, version 2 (bench/schema/perf_result.schema.json;
// lanes-plot reads it). Result keys follow nccl-tests' JSON output (size,
// count, type, redop, root, out_of_place/in_place with time, alg_bw, bus_bw,
// nwrong); version 2 adds the run's command, environment, topology, measured
// bounds, and per row the backend, the plan Lanes chose and the bound.
//
// The file is rewritten as the sweep goes (save(), rank 0), each time to
// FILE.tmp renamed over FILE, so FILE is always one whole document with every
// row so far: a run killed part-way (timeout, lanes-run forwarding SIGTERM)
// leaves its finished sizes behind, marked "complete": false.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "perf/copy_bounds.h"

namespace lanes::perf {

class JsonReport {
 public:
  struct Header {
    std::string tool;        // "lanes_all_reduce_perf"
    std::string collective;  // "allreduce"
    std::string memory;      // "host" | "device"
    std::string command;     // argv joined by spaces
    int nranks = 1;
    int graphLaunches = 0;
    std::vector<std::pair<std::string, std::string>> environment;  // LANES_*, NCCL_*
  };
  struct Timing {
    double timeUs = 0, algBw = 0, busBw = 0;
    int64_t wrong = -1;  // -1: not checked
  };
  struct Row {
    std::string backend;  // "lanes" | "nccl"
    uint64_t size = 0, count = 0;
    std::string type, redop;
    int root = -1;
    std::string plan;                  // "" for nccl
    std::optional<double> boundBusBw;  // GB/s
    Timing out, in;
  };
  // Where each rank ran (gpu -1: host memory).
  struct Place {
    int rank;
    std::string host;
    int gpu;
    std::string label;  // "[bus id] name"
  };
  // One GPU's copy bandwidth (gpu >= 0), or one host's memcpy bandwidth
  // (gpu -1, host memory runs), measured in this run (--bounds).
  struct Bound {
    std::string host;
    int gpu = -1;
    size_t bytes = 0;                    // per transfer
    std::optional<CopyBounds> gpuRates;  // GB/s
    std::optional<double> hostCopy;      // GB/s of bytes copied, all ranks of the host at once
  };

  void setHeader(Header h) { header_ = std::move(h); }
  void setGraphLaunches(int n) { header_.graphLaunches = n; }
  void addPlace(Place p) { places_.push_back(std::move(p)); }
  void addBound(Bound b) { bounds_.push_back(std::move(b)); }
  void addRow(Row r) { rows_.push_back(std::move(r)); }

  // The closing keys, for the rows so far.
  struct Footer {
    double avgBusBw = 0;
    std::vector<std::pair<std::string, double>> avgByBackend;  // "avg_bus_bw_by_backend"
    int errors = 0;                                            // "out_of_bounds"
    bool complete = false;  // the run ended normally; false while it still runs
  };

  // The whole document.
  std::string render(const Footer& footer) const;
  // Writes render() to path + ".tmp" and renames it over path (atomic within
  // one file system); false with *error set when it cannot.
  bool write(const std::string& path, const Footer& footer, std::string* error) const;
  // write() as the sweep goes: always when footer.complete, otherwise only
  // once 10x the last write's duration has passed since it, so rewriting a
  // growing file (-N 0 runs for hours) stays under ~10% of the run's time.
  // true when nothing failed (a skipped write included). A path that exists
  // and is not a regular file (FIFO, /dev/stdout, symlink) is written once,
  // in place, when footer.complete.
  bool save(const std::string& path, const Footer& footer, std::string* error);

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point lastEnd_{};  // when the last write finished
  Clock::duration lastCost_{};   // how long it took
  bool written_ = false;
  bool targetChecked_ = false, direct_ = false;
  Header header_;
  std::vector<Place> places_;
  std::vector<Bound> bounds_;
  std::vector<Row> rows_;
};

}  // namespace lanes::perf
