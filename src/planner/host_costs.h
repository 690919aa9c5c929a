// The host algorithms' cost model: the predicted time of one collective by an
// algorithm, as the sum of three terms a user can read: latency (hops on the
// critical path times the hop latency), transfer (bytes through the slowest
// hop at its share of the host's copy rate) and reduction (bytes reduced by a
// core at its share of the reduction rate). The figures come from
// MachineFacts (measured by `lanes-topo --probe`, else assumed); docs/planner.md
// derives each formula.
#pragma once

#include <string>

#include "algorithms/algorithm.h"
#include "exec/call_facts.h"

namespace lanes {

struct CostTerms {
  // Seconds. `memory`: where host memory, not the links, bounds the bytes'
  // way (the device paths' DMA into and out of host memory).
  double latency = 0, transfer = 0, reduce = 0, memory = 0;
  double total() const { return latency + transfer + reduce + memory; }
  // The largest term and its share: "transfer 71%", "host memory 61%".
  std::string deciding() const;
};

// A measured curve's rate at `bytes` (MachineFacts::curveBytes sizes):
// interpolated on the log of the size between its points, flat beyond them.
double rateAt(const double* curve, double bytes);

// Host summation of host buffers takes a shared arena of SumArena::kSlots
// chunks per rank (transport/shm/sum_arena.h): up to this many ranks
// (beyond, its memory outgrows its use).
inline constexpr int kSharedSumMaxRanks = 16;

// Whether `algo` serves `facts`'s collective on `machine`'s ranks: what it
// implements (algoSupports), for the hierarchical collectives ranks on
// several hosts, or on several CPU packages of one host, the same number
// (more than one) on each, and for host summation 2 to kSharedSumMaxRanks
// ranks of one host.
bool hostAlgoServes(AlgoId algo, const CallFacts& facts, const MachineFacts& machine);
// A hop across the CPU packages of one host: as probed, else assumed from
// the hop figures (twice its latency, half its 1 MiB rate).
double crossPackageLatencyUs(const MachineFacts& m);
double crossPackageGBs(const MachineFacts& m);
// A hop whose peer is not running, where a host's ranks outnumber its cores:
// it waits for the peer's turn on a core. Fitted to this 2-core VM's
// calibration (3 and 4 ranks: 3-4.5 us a hop, a rank running half the time
// or two thirds); a pair of thread ranks pinned to one CPU measures no such
// thing (about 180 us a hop there: each waits out the other's backoff).
inline constexpr double kUnscheduledPeerHopUs = 8.0;

// The predicted time of `facts`'s collective by `algo` (which must serve it).
CostTerms hostAlgoCost(AlgoId algo, const CallFacts& facts, const MachineFacts& machine);

}  // namespace lanes
