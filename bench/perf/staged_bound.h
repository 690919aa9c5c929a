// The bound of a device all-reduce on the host-staged path
// (docs/gpu_data_path.md, "Bytes across PCIe"): what the algorithm must move
// across one GPU's link each way, and the time that takes at measured rates.
// Pure arithmetic, so the unit tests check it.
#pragma once

#include <algorithm>

namespace lanes::perf {

struct LinkBytes {
  double down = 0;  // device -> host (D2H)
  double up = 0;    // host -> device (H2D)
};

// All-reduce of `bytes` per rank over `nranks` ranks, `ranksOnGpu` of them on
// the GPU whose link is counted. Per rank: down = S (the peers' segments of
// its input, then its reduced segment), up = 2 (N-1)/N x S (the peers' parts
// of its segment, then the others' results).
inline LinkBytes stagedAllReduceBytes(double bytes, int nranks, int ranksOnGpu) {
  const double n = nranks;
  LinkBytes perRank{bytes, 2.0 * (n - 1) / n * bytes};
  return {perRank.down * ranksOnGpu, perRank.up * ranksOnGpu};
}

// Seconds at least, with both directions running at once at the given GB/s
// (1e9 bytes/s): the slower direction decides.
inline double linkBoundSeconds(const LinkBytes& b, double upGBps, double downGBps) {
  return std::max(b.down / (downGBps * 1e9), b.up / (upGBps * 1e9));
}

}  // namespace lanes::perf
