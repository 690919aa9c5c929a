// Where every rank of a communicator sits: its host, GPU (bus id, link),
// NUMA node and CPU package, exchanged at init so the planner can read any
// rank's placement. The machine's topology itself is discovered once per
// process (topology/discovery.h) and shared by every communicator in it.
#pragma once

#include <sched.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

struct lanesComm;

namespace lanes {

// Fixed-size, sent as bytes through the bootstrap all-gather.
struct RankPlacement {
  int32_t rank = -1;
  int32_t cudaDev = -1;
  int32_t numa = -1;     // NUMA node of the rank's GPU (without one: its CPUs'), -1 unknown
  int32_t package = -1;  // CPU package of that node, -1 unknown
  int32_t linkGen = 0, linkWidth = 0;
  uint64_t hostHash = 0;
  char busId[16] = {};  // "0000:19:00.0", empty without a GPU
  int32_t mps = 0;      // 1: the GPU's contexts run under MPS
  int32_t wire = 0;     // the rank's WireFormat (LANES_WIRE / config.wireFormat)
};

namespace topo {
struct Topology;
struct Probes;
}  // namespace topo
// This process's topology, discovered (or loaded from LANES_TOPO_FILE) on
// first call; later calls return the same object.
const topo::Topology& processTopology();
// A copy of it with its probes as they are now: readers of the probes take
// this, since a first use (core/first_use_probe.h) may attach them while
// other communicators are being made. The other parts never change.
topo::Topology processTopologySnapshot();
// Gives the process topology probe results measured after discovery.
void attachProcessProbes(topo::Probes probes);

// Fills comm->placement for every rank (collective over the bootstrap). A
// rank without a GPU gets the NUMA node and package of its CPUs (below).
Status exchangePlacement(lanesComm* comm);

// Whether `cpu` is in a Linux CPU list ("0-3,8,10-11").
bool inCpuList(const std::string& list, int cpu);
// The CPUs of `list` that `allowed` holds, into *out: false where that is
// none of them or all of `allowed` (nothing to narrow).
bool narrowCpus(const std::string& list, const cpu_set_t& allowed, cpu_set_t* out);
// The CPUs near this rank's GPU (its NUMA node's, as the topology lists
// them) that the process may run on: where a thread that works for the GPU
// (the proxy's) belongs. false without a GPU, a known list, or anything to narrow.
bool gpuLocalCpus(const lanesComm* comm, cpu_set_t* out);
// The NUMA node (index into t.nodes, -1 unknown) of a rank without a GPU, by
// the model's CPU list of each node, as lanes-topo prints them: the only
// node; else the one holding every CPU in `allowed` (the affinity mask, may
// be null); else the one holding `current`, the CPU it runs on now (first
// touch puts what it allocates at init there).
int hostNumaNode(const topo::Topology& t, const cpu_set_t* allowed, int current);

// Whether ranks of two processes run on one GPU (same host and PCI bus id)
// that does not run MPS. Their CUDA contexts take turns on it in time slices
// of about 2 ms, so any hand-off between them on the GPU (a spinning kernel,
// a stream waiting on a counter) waits for a slice; under MPS they run at
// once, as on separate GPUs. The same answer on every rank (placement and
// pids are exchanged at init); false when the bus ids are unknown.
bool processesTimeSliceGpu(const lanesComm* comm);
// The most ranks on one GPU (same host and bus id), 1 when bus ids are
// unknown: they share that GPU's link and copy engines.
int ranksPerGpu(const lanesComm* comm);
// Whether every rank runs on this host (same host hash); true without a
// bootstrap (one rank).
bool allOnOneHost(const lanesComm* comm);

// Ranks per process, from the exchanged (host, pid) of every rank: whether
// some process holds several ranks (threads), and whether that happens in a
// communicator that also spans other processes. The same answer on every
// rank; false without a bootstrap (one rank).
bool someProcessHoldsSeveralRanks(const lanesComm* comm);
bool threadsBesideProcesses(const lanesComm* comm);
// The ranks that share this rank's CUDA context (threads of this process on
// its GPU), in rank order, this rank included; empty without a bootstrap.
std::vector<int> ranksSharingMyContext(const lanesComm* comm);

}  // namespace lanes
