// The physical bound of one collective at one size, from the rates measured
// in the same run (--bounds). Pure arithmetic, so unit tests check it.
//
// Every byte a rank's data must send leaves through its GPU's PCIe link
// (D2H) and every byte it must receive comes in through it (H2D): on a
// PCIe-only box nothing else connects GPUs. Ranks sharing a GPU share its
// link. With both directions busy the both-ways rates apply, else the
// one-way rate. The slowest GPU decides. Host memory: every byte a rank
// receives is copied once (read + write) by the host's memory system, whose
// measured aggregate memcpy rate (all ranks copying at once) bounds the host;
// the network between hosts is not modelled.
#pragma once

#include <algorithm>
#include <vector>

#include "coll.h"
#include "copy_bounds.h"

namespace lanes::perf {

// One GPU (or one host, for host memory) and the traffic of its ranks.
struct LinkLoad {
  double out = 0;  // bytes leaving (D2H)
  double in = 0;   // bytes arriving (H2D)
};

// Seconds the link needs at least; 0 for no traffic, -1 for missing rates.
inline double gpuLinkSeconds(const LinkLoad& l, const CopyBounds& b) {
  if (l.out <= 0 && l.in <= 0) return 0;
  const bool both = l.out > 0 && l.in > 0;
  const double down = both ? b.bothD2h : b.d2h;
  const double up = both ? b.bothH2d : b.h2d;
  if ((l.out > 0 && down <= 0) || (l.in > 0 && up <= 0)) return -1;
  return std::max(l.out > 0 ? l.out / (down * 1e9) : 0.0, l.in > 0 ? l.in / (up * 1e9) : 0.0);
}

// Host memory: the arriving bytes copied once at the aggregate memcpy rate.
inline double hostCopySeconds(const LinkLoad& l, double copyGBps) {
  if (l.in <= 0) return 0;
  return copyGBps > 0 ? l.in / (copyGBps * 1e9) : -1;
}

// busbw the bound allows: the collective's algbw at the bound time, times
// its bus factor. 0 when the bound is unknown or there is no traffic.
inline double boundBusBw(double algBytes, double busFactor, double seconds) {
  if (seconds <= 0 || algBytes <= 0) return 0;
  return algBytes / seconds / 1e9 * busFactor;
}

}  // namespace lanes::perf
