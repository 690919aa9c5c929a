#include "perf/cpu_share.h"

#include <sched.h>

#include <bit>
#include <map>

namespace lanes::perf {

CpuMask allowedCpus() {
  CpuMask mask(kCpuMaskWords, 0);
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return mask;  // unknown: no note
  for (int c = 0; c < kCpuMaskWords * 64 && c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) mask[c / 64] |= uint64_t{1} << (c % 64);
  }
  return mask;
}

std::string oversubscriptionNote(const std::vector<RankCpus>& ranks) {
  struct Host {
    std::string name;
    int ranks = 0;
    CpuMask cpus = CpuMask(kCpuMaskWords, 0);
  };
  std::map<uint64_t, Host> hosts;
  std::vector<uint64_t> order;  // hosts as ranks first name them
  for (const RankCpus& r : ranks) {
    auto [it, added] = hosts.try_emplace(r.hostHash);
    if (added) order.push_back(r.hostHash);
    Host& h = it->second;
    h.name = r.host;
    ++h.ranks;
    // The union: ranks bound to one CPU each (mpirun's default) share none.
    for (size_t w = 0; w < h.cpus.size() && w < r.cpus.size(); ++w) h.cpus[w] |= r.cpus[w];
  }
  for (uint64_t id : order) {
    const Host& h = hosts[id];
    int cpus = 0;
    for (uint64_t w : h.cpus) cpus += std::popcount(w);
    if (cpus == 0 || h.ranks <= cpus) continue;
    return "# Note: " + std::to_string(h.ranks) + " ranks on " + std::to_string(cpus) +
           " CPU(s) of " + h.name +
           ": ranks take turns on a CPU, so times are longer and noisier than with a CPU "
           "per rank.\n";
  }
  return "";
}

}  // namespace lanes::perf
