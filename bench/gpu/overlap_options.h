// lanes_overlap_gemm's flags. Plain C++17: overlap_gemm.cu (nvcc, C++17)
// includes this; overlap_options.cc parses.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace lanes_overlap {

struct Options {
  int m = 8192;                      // GEMM size: m x m x m
  double seconds = 2.0;              // length of each GEMM window
  int ranks = 2;                     // --gpus 0: thread ranks on GPU --gpu
  int gpu = 0;                       // --gpus 0: the one GPU
  int gpus = 0;                      // > 0: one rank and one GEMM on each of GPUs 0..gpus-1
  size_t bytes = size_t{256} << 20;  // all-reduce size (float32 sum)
  double queue = 2.0;                // all-reduce work queued, in solo GEMM windows
  std::string backend = "lanes";     // lanes | nccl
  std::string compare;               // "" or the other backend, run second
  std::string json;                  // -J: rows as JSON

  // The backends in the order they run: backend, then compare.
  std::vector<std::string> backends() const;
};

// "" when the flags are usable; "help" for -h/--help; else what is wrong.
std::string parseOptions(int argc, char** argv, Options* o);
const char* usage();

}  // namespace lanes_overlap
