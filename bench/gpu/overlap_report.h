// lanes_overlap_gemm's results and how they are printed: one row per GEMM GPU
// per backend, a side-by-side table for --compare, and -J JSON. Plain C++17:
// overlap_gemm.cu (nvcc, C++17) includes this.
#pragma once

#include <string>
#include <vector>

#include "gpu/overlap_options.h"

namespace lanes_overlap {

struct GpuRow {
  int gpu = 0;
  int gemms = 0;  // GEMMs per window
  double soloSeconds = 0, concurrentSeconds = 0;
  double solo = 0, concurrent = 0;  // TFLOP/s
  bool covered = true;  // this GPU's all-reduces were still running when its last GEMM ended
  double fraction() const { return solo > 0 ? concurrent / solo : 0; }
};

// One backend's measurement.
struct Run {
  std::string backend;  // "lanes" | "nccl"
  int ranks = 0;
  double arSoloSeconds = 0, arConcurrentSeconds = 0;  // per call, the slowest rank
  int arCalls = 0;                                    // queued for the concurrent window
  std::vector<GpuRow> rows;

  double minFraction() const;
  bool allCovered() const;
};

void printRun(const Run& run, const Options& o);
// The fraction per GPU, one column per backend (--compare).
void printComparison(const std::vector<Run>& runs);
// "" or the error (file could not be written).
std::string writeJson(const std::string& path, const std::vector<Run>& runs, const Options& o);

}  // namespace lanes_overlap
