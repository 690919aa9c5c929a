// lanes_scale_probe: what one communicator costs a process, at N ranks on
// this host. Run under lanes-run (bench/scale/run_scale.sh sweeps N). Each
// rank times its init and a split (color rank % 2), counts its descriptors
// and threads before and after each, runs short collectives (all-reduce of
// 4 B and 1 MiB, all-gather, all-to-all) and reads from its own mappings the
// shared-memory rings it made; rank 0 samples /dev/shm's use throughout.
// Rank 0 prints one JSON line with the slowest rank's times, the largest
// per-process counts and the host's peak /dev/shm.
#include <sys/statvfs.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "bench/scale/ring_mappings.h"
#include "lanes/lanes.h"

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int countEntries(const char* dir) {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

uint64_t devShmUsed() {
  struct statvfs v {};
  if (::statvfs("/dev/shm", &v) != 0) return 0;
  return static_cast<uint64_t>(v.f_blocks - v.f_bfree) * v.f_frsize;
}

// Polls /dev/shm's use until stopped; the peak above the first sample.
class DevShmSampler {
 public:
  DevShmSampler() : base_(devShmUsed()), peak_(base_) {
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        const uint64_t u = devShmUsed();
        if (u > peak_.load()) peak_.store(u);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    });
  }
  ~DevShmSampler() { stopNow(); }
  uint64_t stopNow() {
    if (thread_.joinable()) {
      stop_.store(true);
      thread_.join();
    }
    return peak_.load() - base_;
  }

 private:
  uint64_t base_;
  std::atomic<uint64_t> peak_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// What each rank reports (all doubles, for one all-gather).
struct Report {
  double initSeconds, splitSeconds, firstAllReduceSeconds, smallAllReduceSeconds;
  double fdsBefore, fdsComm, fdsSplit, threadsBefore, threadsComm, threadsSplit;
  double ringBytes;
  // Held by the communicator after its all-reduces and all-gather (ring and
  // tree peers connected), and after its all-to-all (every peer connected).
  double fdsRings, threadsRings, fdsAllToAll, threadsAllToAll;
};
constexpr size_t kFields = sizeof(Report) / sizeof(double);

bool check(lanesResult_t r, lanesComm_t comm, const char* what) {
  if (r == lanesSuccess) return true;
  std::fprintf(stderr, "lanes_scale_probe: %s: %s\n", what, lanesGetLastError(comm));
  return false;
}

}  // namespace

int main() {
  const char* rankEnv = std::getenv("LANES_RANK");
  const bool root = rankEnv == nullptr || std::string(rankEnv) == "0";
  std::unique_ptr<DevShmSampler> sampler;
  if (root) sampler = std::make_unique<DevShmSampler>();
  Report me{};
  me.fdsBefore = countEntries("/proc/self/fd");
  me.threadsBefore = countEntries("/proc/self/task");

  lanesComm_t comm = nullptr;
  auto t0 = Clock::now();
  if (!check(lanesCommInitFromEnv(&comm, nullptr), nullptr, "init")) return 1;
  me.initSeconds = secondsSince(t0);
  me.fdsComm = countEntries("/proc/self/fd") - me.fdsBefore;
  me.threadsComm = countEntries("/proc/self/task") - me.threadsBefore;
  int rank = 0, n = 0;
  lanesCommUserRank(comm, &rank);
  lanesCommCount(comm, &n);

  std::vector<float> big(256 * 1024, 1.0f);
  t0 = Clock::now();
  if (!check(lanesAllReduce(big.data(), big.data(), 1, lanesFloat32, lanesSum, comm, nullptr), comm,
             "all-reduce"))
    return 1;
  me.firstAllReduceSeconds = secondsSince(t0);
  constexpr int kIters = 20;
  t0 = Clock::now();
  for (int i = 0; i < kIters; ++i)
    if (!check(lanesAllReduce(big.data(), big.data(), 1, lanesFloat32, lanesSum, comm, nullptr),
               comm, "all-reduce"))
      return 1;
  me.smallAllReduceSeconds = secondsSince(t0) / kIters;
  if (!check(
          lanesAllReduce(big.data(), big.data(), big.size(), lanesFloat32, lanesSum, comm, nullptr),
          comm, "all-reduce of 1 MiB"))
    return 1;
  std::vector<float> part(16, 1.0f), all(16 * static_cast<size_t>(n));
  if (!check(lanesAllGather(part.data(), all.data(), 16, lanesFloat32, comm, nullptr), comm,
             "all-gather"))
    return 1;
  me.fdsRings = countEntries("/proc/self/fd") - me.fdsBefore;
  me.threadsRings = countEntries("/proc/self/task") - me.threadsBefore;
  std::vector<float> a2aIn(4 * static_cast<size_t>(n), 1.0f), a2aOut(a2aIn.size());
  if (!check(lanesAlltoAll(a2aIn.data(), a2aOut.data(), 4, lanesFloat32, comm, nullptr), comm,
             "all-to-all"))
    return 1;
  me.fdsAllToAll = countEntries("/proc/self/fd") - me.fdsBefore;
  me.threadsAllToAll = countEntries("/proc/self/task") - me.threadsBefore;

  const double fdsBeforeSplit = countEntries("/proc/self/fd");
  const double threadsBeforeSplit = countEntries("/proc/self/task");
  lanesComm_t half = nullptr;
  t0 = Clock::now();
  if (!check(lanesCommSplit(comm, rank % 2, rank, &half, nullptr), comm, "split")) return 1;
  me.splitSeconds = secondsSince(t0);
  me.fdsSplit = countEntries("/proc/self/fd") - fdsBeforeSplit;
  me.threadsSplit = countEntries("/proc/self/task") - threadsBeforeSplit;
  if (!check(lanesAllReduce(big.data(), big.data(), 1, lanesFloat32, lanesSum, half, nullptr), half,
             "all-reduce on the split"))
    return 1;
  me.ringBytes = static_cast<double>(lanes::bench::ringBytesMadeBy(rank));

  std::vector<double> reports(kFields * static_cast<size_t>(n));
  if (!check(lanesAllGather(&me, reports.data(), kFields, lanesFloat64, comm, nullptr), comm,
             "gathering the reports"))
    return 1;
  lanesCommDestroy(half);
  lanesCommDestroy(comm);
  if (!root) return 0;
  const uint64_t peak = sampler->stopNow();

  Report worst{};
  double rings = 0;
  for (int r = 0; r < n; ++r) {
    Report x{};
    std::copy_n(reports.data() + kFields * static_cast<size_t>(r), kFields,
                reinterpret_cast<double*>(&x));
    worst.initSeconds = std::max(worst.initSeconds, x.initSeconds);
    worst.splitSeconds = std::max(worst.splitSeconds, x.splitSeconds);
    worst.firstAllReduceSeconds = std::max(worst.firstAllReduceSeconds, x.firstAllReduceSeconds);
    worst.smallAllReduceSeconds = std::max(worst.smallAllReduceSeconds, x.smallAllReduceSeconds);
    worst.fdsComm = std::max(worst.fdsComm, x.fdsComm);
    worst.fdsSplit = std::max(worst.fdsSplit, x.fdsSplit);
    worst.threadsComm = std::max(worst.threadsComm, x.threadsComm);
    worst.threadsSplit = std::max(worst.threadsSplit, x.threadsSplit);
    worst.fdsRings = std::max(worst.fdsRings, x.fdsRings);
    worst.threadsRings = std::max(worst.threadsRings, x.threadsRings);
    worst.fdsAllToAll = std::max(worst.fdsAllToAll, x.fdsAllToAll);
    worst.threadsAllToAll = std::max(worst.threadsAllToAll, x.threadsAllToAll);
    rings += x.ringBytes;
  }
  std::printf(
      "{\"ranks\": %d, \"init_s\": %.4f, \"split_s\": %.4f, \"first_allreduce_s\": %.5f, "
      "\"allreduce_4B_us\": %.1f, \"fds_per_comm\": %.0f, \"fds_per_split\": %.0f, "
      "\"threads_per_comm\": %.0f, \"threads_per_split\": %.0f, \"fds_after_rings\": %.0f, "
      "\"threads_after_rings\": %.0f, \"fds_after_alltoall\": %.0f, "
      "\"threads_after_alltoall\": %.0f, \"ring_mib\": %.1f, \"devshm_peak_mib\": %.1f}\n",
      n, worst.initSeconds, worst.splitSeconds, worst.firstAllReduceSeconds,
      worst.smallAllReduceSeconds * 1e6, worst.fdsComm, worst.fdsSplit, worst.threadsComm,
      worst.threadsSplit, worst.fdsRings, worst.threadsRings, worst.fdsAllToAll,
      worst.threadsAllToAll, rings / (1 << 20), static_cast<double>(peak) / (1 << 20));
  return 0;
}
