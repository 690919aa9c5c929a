// RankRun's physical bounds: the copy rates measured in this run (--bounds)
// and the bus bandwidth they allow at each size (bound_model.h).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "base/host_id.h"
#include "perf/backend_nccl.h"
#include "perf/bound_model.h"
#include "perf/element.h"
#include "perf/host_copy.h"
#include "perf/pattern.h"
#include "perf/rank_run.h"
#include "perf/report.h"
#include "perf/run_env.h"

namespace lanes::perf {

// Device memory: the lowest rank on each (host, GPU) measures that GPU's
// copy engines, all GPUs at once, as a collective loads them; before any
// collective on device buffers, so the allocations it makes and frees cannot
// wait on a peer's stream. Host memory: every rank copies at once and each
// host's rate is the sum over its ranks.
void RankRun::measureBounds() {
  const bool device = setup_.memory == Memory::Device;
  bool first = true;
  for (int r = 0; r < rank_; ++r) {
    if (places_[r].hostHash == places_[rank_].hostHash && places_[r].gpu == gpu_) first = false;
  }
  double values[6] = {};
  if (device && first) {
    CopyBounds b;
    ok(measureCopyBounds(kBoundBytes, &b), "measuring copy bandwidth (--bounds)");
    values[0] = 1;
    values[1] = b.h2d;
    values[2] = b.d2h;
    values[3] = b.bothH2d;
    values[4] = b.bothD2h;
    values[5] = b.d2dCopy;
  } else if (!device) {
    barrier();  // all ranks copy at once
    ok(measureHostCopy(kHostCopyBytes, &values[1]), "measuring host memory bandwidth (--bounds)");
    values[0] = 1;
  }
  std::vector<double> numbers = gather(values, 6, lanesFloat64);
  for (int r = 0; r < nranks_; ++r) {
    const double* v = numbers.data() + 6 * r;
    if (v[0] == 0) continue;
    const Where w{places_[r].hostHash, device ? places_[r].gpu : -1};
    if (device) {
      gpuRates_[w] = CopyBounds{v[1], v[2], v[3], v[4], v[5]};
    } else {
      hostRates_[w] += v[1];
    }
  }
  if (!printer()) return;
  char line[kLine];
  if (device) {
    headerNotes_.push_back("#\n# Bounds measured in this run: cudaMemcpyAsync of " +
                           std::to_string(kBoundBytes >> 20) +
                           " MiB, pinned host <-> device, all GPUs at once; GB/s = 1e9 B/s\n");
    std::snprintf(line, sizeof(line), "#  %-12s %6s  %8s  %8s  %10s  %10s  %10s\n", "host", "GPU",
                  "H2D", "D2H", "both: H2D", "both: D2H", "D2D copy");
    headerNotes_.push_back(line);
  } else {
    headerNotes_.push_back("#\n# Bounds measured in this run: memcpy of " +
                           std::to_string(kHostCopyBytes >> 20) +
                           " MiB by every rank at once, summed per host; GB/s = 1e9 B/s\n");
  }
  std::set<Where> shown;
  for (int r = 0; r < nranks_; ++r) {
    const Where w{places_[r].hostHash, device ? places_[r].gpu : -1};
    if (!shown.insert(w).second) continue;
    if (device) {
      auto it = gpuRates_.find(w);
      if (it == gpuRates_.end()) continue;
      const CopyBounds& b = it->second;
      std::snprintf(line, sizeof(line), "#  %-12s GPU %2d  %8.2f  %8.2f  %10.2f  %10.2f  %10.2f\n",
                    places_[r].host.c_str(), w.second, b.h2d, b.d2h, b.bothH2d, b.bothD2h,
                    b.d2dCopy);
      json_.addBound({places_[r].host, w.second, kBoundBytes, b, std::nullopt});
    } else {
      std::snprintf(line, sizeof(line), "#  %-12s host memory copy  %8.2f GB/s\n",
                    places_[r].host.c_str(), hostRates_[w]);
      json_.addBound({places_[r].host, -1, kHostCopyBytes, std::nullopt, hostRates_[w]});
    }
    headerNotes_.push_back(line);
  }
  headerNotes_.push_back(
      device ? "#  (both: each direction while the other runs; D2D copy: bytes copied/s, the "
               "memory reads+writes are 2x)\n"
             : "#  (bytes copied/s; the memory reads+writes are 2x)\n");
  headerNotes_.push_back(
      "#  bound: the busbw these rates allow (each rank's least traffic over its GPU's link, or "
      "its host's memory); %bound: out-of-place busbw / bound\n");
}

// The busbw the measured rates allow at this size (bound_model.h), from
// every rank's least traffic and where it runs; nullopt without --bounds.
std::optional<double> RankRun::boundFor(const CollCounts& c, size_t ts) const {
  if (!setup_.bounds) return std::nullopt;
  const bool device = setup_.memory == Memory::Device;
  const int root = spec_.rooted ? a_.root : 0;
  std::map<Where, LinkLoad> loads;
  for (int r = 0; r < nranks_; ++r) {
    RankTraffic tr = spec_.traffic(c, ts, r, nranks_, root);
    LinkLoad& l = loads[{places_[r].hostHash, device ? places_[r].gpu : -1}];
    l.out += tr.out;
    l.in += tr.in;
  }
  double worst = 0;
  for (const auto& [where, load] : loads) {
    double s = -1;
    if (device) {
      auto it = gpuRates_.find(where);
      if (it != gpuRates_.end()) s = gpuLinkSeconds(load, it->second);
    } else {
      auto it = hostRates_.find(where);
      if (it != hostRates_.end()) s = hostCopySeconds(load, it->second);
    }
    if (s < 0) return std::nullopt;
    worst = std::max(worst, s);
  }
  double bound =
      boundBusBw(spec_.algBytes(c.paramCount, ts, nranks_), spec_.busFactor(nranks_), worst);
  if (bound <= 0) return std::nullopt;
  return bound;
}

}  // namespace lanes::perf
