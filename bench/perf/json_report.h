// -J FILE: the same results as JSON, for scripts (keys follow nccl-tests'
// JSON output: size, count, type, redop, root, out_of_place/in_place with
// time, alg_bw, bus_bw, nwrong).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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
  // Writes the file; false with *error set when it cannot.
  bool write(const std::string& path, const char* collective, int nranks, double avgBusBw,
             int errors, std::string* error) const;

 private:
  struct Row {
    Params p;
    Timing out, in;
  };
  std::vector<Row> rows_;
};

}  // namespace lanes::perf
