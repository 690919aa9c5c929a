// Whether ranks outnumber the CPUs they may run on. Host-memory ranks (and
// the CUDA path's host threads) spin while they wait for a peer, so ranks
// that take turns on a CPU make times long and noisy: rank 0 says so in one
// header line (`make bench` runs 4 host ranks on a 2-core CI box).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lanes::perf {

// CPUs 0..1023 as bits: one rank's affinity, gathered from every rank.
inline constexpr int kCpuMaskWords = 16;
using CpuMask = std::vector<uint64_t>;  // kCpuMaskWords words

// The CPUs this process may run on (sched_getaffinity: taskset, cgroups'
// cpusets and an MPI launcher's binding all show here).
CpuMask allowedCpus();

// One rank as the note needs it.
struct RankCpus {
  uint64_t hostHash = 0;
  std::string host;
  CpuMask cpus;
};

// "# Note: ..." (with its newline) for the first host whose ranks outnumber
// the CPUs they may run on together; empty when no host's do.
std::string oversubscriptionNote(const std::vector<RankCpus>& ranks);

}  // namespace lanes::perf
