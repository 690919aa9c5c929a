// -J FILE: the same results as JSON, for scripts (keys follow nccl-tests'
// JSON output: size, count, type, redop, root, out_of_place/in_place with
// time, alg_bw, bus_bw, nwrong).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "perf/copy_bounds.h"

namespace lanes::perf {

class JsonReport {
 public:
  struct Params {
    uint64_t size, count;
    std::string type, redop;
    int root;
  };
  struct Timing {
    double timeUs, algBw, busBw;
    int64_t wrong;  // -1: not checked
  };
  void addRow(Params p, Timing outOfPlace, Timing inPlace) {
    rows_.push_back({std::move(p), outOfPlace, inPlace});
  }
  // Where each rank ran (gpu -1: host memory).
  struct Place {
    int rank;
    std::string host;
    int gpu;
    std::string label;  // "[bus id] name"
  };
  void addPlace(Place p) { places_.push_back(std::move(p)); }
  // One GPU's copy bandwidth, measured in this run (--bounds).
  struct Bound {
    std::string host;
    int gpu;
    size_t bytes;  // per transfer
    CopyBounds gbps;
  };
  void addBound(Bound b) { bounds_.push_back(std::move(b)); }
  void setMemory(std::string memory, int graphLaunches) {
    memory_ = std::move(memory);
    graphLaunches_ = graphLaunches;
  }
  // Writes the file; false with *error set when it cannot.
  bool write(const std::string& path, const char* collective, int nranks, double avgBusBw,
             int errors, std::string* error) const;

 private:
  struct Row {
    Params p;
    Timing out, in;
  };
  std::vector<Row> rows_;
  std::vector<Place> places_;
  std::vector<Bound> bounds_;
  std::string memory_ = "host";
  int graphLaunches_ = 0;
};

}  // namespace lanes::perf
