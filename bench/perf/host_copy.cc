#include "perf/host_copy.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

namespace lanes::perf {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

}  // namespace

Status measureHostCopy(size_t bytes, double* gbps) {
  std::unique_ptr<void, FreeDeleter> a(std::aligned_alloc(4096, bytes));
  std::unique_ptr<void, FreeDeleter> b(std::aligned_alloc(4096, bytes));
  if (!a || !b) {
    return systemError("could not allocate 2 x " + std::to_string(bytes >> 20) +
                       " MiB to measure host memory bandwidth (--bounds).");
  }
  std::memset(a.get(), 1, bytes);  // resident before timing
  std::memset(b.get(), 2, bytes);
  constexpr int kReps = 4;
  double best = 0;
  for (int i = 0; i < kReps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    std::memcpy(i % 2 ? a.get() : b.get(), i % 2 ? b.get() : a.get(), bytes);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0) best = std::max(best, static_cast<double>(bytes) / s / 1e9);
  }
  *gbps = best;
  return Status::ok();
}

}  // namespace lanes::perf
