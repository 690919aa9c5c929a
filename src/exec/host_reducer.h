// HostReducer: CPU threads that sum chunks staged in host memory, for the
// host-summation plans of device buffers (exec/cuda/staged_host_sum.cc). The
// GPU streams put each rank's chunk into the shared staging arena and raise
// its `ready` counter; a reducer waits for every input's counter, sums its
// rank's segment in rank order with the SIMD kernels (kernels/cpu/reduce.h),
// writes the sum into the result slot and raises `done`, which the streams
// that upload the result wait for. No GPU kernel and no SM in the data path.
//
// With a compressed wire format (kernels/cpu/wire_codec.h) the inputs and the
// result are frames: each input is decoded and added in float32, the sum
// encoded once into the result's frames (which the GPUs decode).
//
// Jobs run in the order pushed, which is the order of the rank's calls. Each
// of the reducer's threads sums its own slice of every job (the slices are
// cut at cache-line multiples), and the last to finish raises `done`.
// Waiting for inputs never times out here: a peer that never delivers stalls
// the batch, which the staged path's watchdog turns into a failure that
// raises every counter past every wait (staged_watchdog.h), so the threads
// run on. CPU-only, so the unit tests run in every build.
#pragma once

#include <sched.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "base/datatype.h"
#include "kernels/cpu/wire_codec.h"

namespace lanes {

class HostReducer {
 public:
  struct Job {
    uint32_t g = 0;  // the chunk: every `ready` counter must reach it
    std::vector<const volatile uint32_t*> ready;
    std::vector<const std::byte*> srcs;  // in rank order: the order of the sums
    std::byte* dst = nullptr;            // must not overlap any source
    size_t count = 0;                    // elements (a wire format: float32 values)
    // Not native: srcs and dst hold frames of this format, starting at a
    // frame; `type` is float32 and `op` a sum (Sum, Avg or PreMulSum).
    WireFormat wire = WireFormat::Native;
    lanesDataType_t type = lanesFloat32;
    RedOpKind op = RedOpKind::Sum;
    double scalar = 1;                  // PreMulSum's factor
    int avgRanks = 0;                   // Avg: the divisor applied last (0: none)
    volatile uint32_t* done = nullptr;  // set to g once dst holds the result
  };

  // `threads` >= 1; `cpus`: where they run (the GPU's NUMA node), if known.
  HostReducer(int threads, std::optional<cpu_set_t> cpus);
  // Stops the threads at once; jobs not yet done are dropped and their
  // `done` never raised (the caller drained or gave up on the streams first).
  ~HostReducer();
  HostReducer(const HostReducer&) = delete;
  HostReducer& operator=(const HostReducer&) = delete;

  void push(Job job);
  int threads() const { return parts_; }
  // Jobs finished so far (tests).
  uint64_t finished() const { return finished_.load(std::memory_order_acquire); }

  // Whether counter value `have` has reached `want` (modulo 2^32, as the
  // streams' waits compare).
  static bool reached(uint32_t have, uint32_t want) {
    return static_cast<int32_t>(have - want) >= 0;
  }

 private:
  struct Pending {
    Job job;
    std::atomic<int> left{0};  // threads still summing their slice
  };
  void run(int index);
  // Until every input's counter reached the job's chunk; false when stopped.
  bool awaitInputs(const Job& job) const;
  void sumSlice(const Job& job, size_t begin, size_t end) const;
  void sumFrames(const Job& job, size_t begin, size_t end) const;
  void retire(uint64_t seq);  // the last slice of job `seq` is done

  const int parts_;  // threads, each summing one slice of every job
  std::mutex mutex_;
  std::condition_variable wake_;
  // Jobs from sequence number base_ on; each thread walks them in order.
  std::deque<std::unique_ptr<Pending>> jobs_;
  uint64_t base_ = 0;
  uint64_t pushed_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> finished_{0};
  std::vector<std::thread> threads_;
};

}  // namespace lanes
