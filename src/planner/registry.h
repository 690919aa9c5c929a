// Path choice as data. Every device path and every host algorithm is an
// entry that states its name, the collectives it serves, its size range, when
// it may run, how it is set up and what it costs; one selection function
// picks the cheapest eligible entry. Execution, the PLAN log, lanes-topo and the perf tools ask
// the same function, so what is reported is what ran. The costs are the
// planner's predictions from the measured machine (device_costs.h,
// host_costs.h; docs/planner.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "base/collective.h"
#include "base/status.h"
#include "exec/call_facts.h"
#include "exec/device_path.h"
#include "planner/host_costs.h"

namespace lanes {

struct DevicePathEntry {
  DevicePath path;
  const char* name;
  const char* serves;  // the collectives and sizes, for --help and the docs
  bool (*eligible)(const CallFacts&);
  CostTerms (*cost)(const CallFacts&, const SelectionConfig&);  // planner/device_costs.h
  // Collective at init, every rank alike (exec/device_path.h); null where
  // another entry's setup makes this one (ll_threads: ll's; the pairs: staged's).
  Status (*setup)(lanesComm*);
};

struct DeviceChoice {
  DevicePath path = DevicePath::Proxy;
  std::string why;
};
struct AlgoChoice {
  AlgoId algo = AlgoId::Ring;
  std::string why;
};

// Sets up every device path of a communicator whose ranks all have a GPU:
// the proxy first (every other path falls back to it), then the others in
// the table's order; then settles the facts the choice reads. Collective, at init.
Status setUpDevicePaths(lanesComm* comm);

// A device path that serves a call, its predicted time and whether
// LANES_PROTO allows it.
struct DeviceCandidate {
  DevicePath path;
  CostTerms cost;
  bool allowed;
};
// Every device path that serves `facts`, cheapest first, as predicted for
// its size class (sizeClassBytes).
std::vector<DeviceCandidate> rankDevicePaths(const CallFacts& facts, const SelectionConfig& config);
// Every device path, cheapest first for `facts`'s kind of batch and size
// class, eligible or not: what a communicator keeps per class (plan_cache.h).
std::vector<DevicePath> devicePathOrder(const CallFacts& facts, const SelectionConfig& config);
// The first path of `order` that serves `facts` and that `config` allows;
// the proxy when none does (it serves everything).
DevicePath chooseDevicePath(const std::vector<DevicePath>& order, const CallFacts& facts,
                            const SelectionConfig& config);
// The cheapest eligible device path that `config` allows, and why.
DeviceChoice chooseDevicePath(const CallFacts& facts, const SelectionConfig& config);
// The device choice and why, as explainHostChoice says the host one.
std::string explainDeviceChoice(const CallFacts& facts, const SelectionConfig& config);
// A host algorithm that serves a call, its predicted time
// (planner/host_costs.h), and whether LANES_ALGO allows it.
struct HostCandidate {
  AlgoId algo;
  CostTerms cost;
  bool allowed;
};
// The size class a host choice is made for: the power of two at or above
// `bytes` (0 stays 0). Every call of a class takes the same algorithm, so the
// choice can be kept per class (HostPlanCache) and lanes-topo reports it.
size_t sizeClassBytes(size_t bytes);
// Every host algorithm that serves `facts`'s collective, cheapest first, as
// predicted for its size class.
std::vector<HostCandidate> rankHostAlgorithms(const CallFacts& facts,
                                              const SelectionConfig& config);
// The cheapest eligible host algorithm that `config` allows; where the list
// allows none that serves the collective, the cheapest of all.
AlgoChoice chooseHostAlgorithm(const CallFacts& facts, const SelectionConfig& config);
// The same for one collective by size alone (perf tools, lanes-topo).
AlgoChoice chooseHostAlgorithm(CollType coll, size_t bytes, int nranks,
                               const SelectionConfig& config);

// The choice and why, for the PLAN log and lanes-topo: "ring 31.2 us
// (transfer 71%); next recursive_doubling 40.1 us; measured inputs".
std::string explainHostChoice(const CallFacts& facts, const SelectionConfig& config);

// "ll", "staged", "proxy/ring", or for host memory "ring": the name the PLAN
// log, the perf tools' JSON and lanes-topo print for one call.
std::string planName(const CallFacts& facts, const SelectionConfig& config);

}  // namespace lanes
