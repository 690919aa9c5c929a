// The all-reduce side of lanes_overlap_gemm, behind one small interface so the
// tool runs the same loop over Lanes or over NCCL (opened with dlopen, as the
// perf tools do). Plain C++17 types only: overlap_gemm.cu includes this and is
// built by nvcc as C++17; the implementation (overlap_collective.cc) is C++20
// and reuses bench/perf's backends.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace lanes_overlap {

// One rank's communicator, used only from that rank's thread.
class RankComm {
 public:
  virtual ~RankComm() = default;
  // float32 sum of `count` elements, enqueued on `stream`. "" when enqueued,
  // else the sentence saying what failed.
  virtual std::string allReduceSum(const void* send, void* recv, size_t count,
                                   cudaStream_t stream) = 0;
};

// The library for one run: loaded once, communicators made per run.
class Collective {
 public:
  virtual ~Collective() = default;
  virtual const char* name() const = 0;      // "lanes" | "nccl"
  virtual std::string describe() const = 0;  // "NCCL 2.21.5 (libnccl.so.2)"
  // Main thread, before the rank threads start. "" or the error.
  virtual std::string start() = 0;
  // Each rank thread once, its GPU current (collective: every rank calls it).
  virtual std::string initRank(int rank, std::unique_ptr<RankComm>* out) = 0;
  // Main thread, after every rank thread has joined (and dropped its RankComm).
  virtual void stop() = 0;
};

// backend "lanes" or "nccl"; devices[r] is rank r's GPU. For nccl this loads
// libnccl.so.2 (LANES_PERF_NCCL_LIB overrides), after defaulting
// NCCL_NVLS_ENABLE to 0 (no NVLink multicast). "" or the error.
std::string openCollective(const std::string& backend, const std::vector<int>& devices,
                           std::unique_ptr<Collective>* out);

}  // namespace lanes_overlap
