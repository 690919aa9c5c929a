// Probes at a machine's first use: where the probe cache holds nothing for
// this machine, one process measures it and caches the figures, so the cost
// model plans from measured inputs from the first run on. Processes that start
// at once take turns on a lock beside the cache: the first measures, the others
// wait and read what it wrote. Each host has a lock of its own: hosts sharing
// a home directory measure at once, while processes of one host that see
// different GPUs (different cache entries) measure in turn, not over each other.
#pragma once

#include <functional>
#include <string>

#include "base/status.h"
#include "topology/model.h"

namespace lanes::topo {

struct FirstUseProbe {
  std::string cachePath;     // probeCachePath(); "" (no cache): nothing is measured
  double lockSeconds = 120;  // the longest wait for another process's turn
  // Fills t->probes (the host and GPU figures), or fails.
  std::function<Status(Topology* t)> measure;
};

enum class FirstUseResult {
  NoCache,   // caching is off: measuring would repeat in every process
  Cached,    // the cache had this machine's figures (another process measured them)
  Measured,  // measured here and cached
};

// The lock a host's measurements take: beside the cache, named by the host.
std::string firstUseLockPath(const std::string& cachePath, const Topology& t);

// Gives `t` probes: from the cache, or measured and then cached. An error
// (the measurement failed, the lock stayed taken, the cache cannot be written)
// leaves t->probes as they were, except that a measurement the cache could not
// take is kept.
Status probeAtFirstUse(const FirstUseProbe& p, Topology* t, FirstUseResult* result);

}  // namespace lanes::topo
