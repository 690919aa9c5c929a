// The facts a path choice reads about one batch of calls (planner/registry.h
// chooses; the device paths state their part: exec/device_path.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "algorithms/algorithm.h"
#include "base/collective.h"
#include "base/name_list.h"

namespace lanes {

// Where a batch of device-buffer calls runs. LlThreads is the LL kernel for
// ranks that are threads of one process: off unless named in LANES_PROTO (a
// spinning kernel can sit behind a peer thread's work in the shared context).
// Pairs and P2pPairs carry one send or receive through the staged path's
// pair slots, in shared host memory or in the receiver's GPU memory over P2P
// (off unless named: where P2P is on, the slots then move to GPU memory).
enum class DevicePath : uint8_t { SharedContext, Ll, LlThreads, Staged, Pairs, P2pPairs, Proxy };
inline constexpr int kDevicePaths = 7;
const char* devicePathName(DevicePath p);

// What selection reads about one batch of calls and its communicator. Every
// field is the same on every rank, so every rank picks the same entry.
struct CallFacts {
  CollType coll = CollType::AllReduce;
  int calls = 1;         // collectives in the batch
  bool sameColl = true;  // all of them are `coll`
  bool p2p = false;      // the batch holds sends or receives
  int p2pCalls = 0;      // ... how many
  bool p2pSelf = false;  // ... one of them to this rank itself
  size_t bytes = 0;      // input bytes per rank over the batch (from the counts)
  int nranks = 1;
  bool device = false;  // device buffers (else host memory)
  // The rank set.
  bool oneHost = true;
  bool threadRanks = false;             // some process holds several ranks
  bool threadsBesideProcesses = false;  // ... and other processes hold ranks too
  // The device paths as the ranks set them up and agreed at init.
  struct Limit {
    bool ready = false;
    size_t maxBytes = 0;
  };
  Limit sharedContext, ll;
  struct Staged {
    bool ready = false;
    bool gatherScatter = false;  // all-gather, broadcast, reduce-scatter too
    size_t proxyUpToBytes = 0;   // processes share a GPU: smaller batches take the proxy
  } staged;
  struct Pairs {
    bool ready = false;        // the staged path has send/recv pair slots
    bool inGpuMemory = false;  // ... in the receivers' GPU memory (P2P)
  } pairs;
};

// The machine as the host algorithms' cost model sees it (planner/host_costs.h):
// measured by `lanes-topo --probe` and cached per machine (topo::HostProbe),
// else assumed. A communicator uses rank 0's figures on every rank, so every
// rank plans alike. Plain data: the ranks exchange it as bytes.
struct MachineFacts {
  // The rate curves' sizes: 4 KiB x 4^i.
  static constexpr int kCurvePoints = 8;
  static constexpr double curveBytes(int i) { return 4096.0 * static_cast<double>(1 << (2 * i)); }
  double callUs = 1;        // fixed cost of a call in the host engine
  double hopLatencyUs = 2;  // one hop of a tiny message between two ranks of a host
  // One hop's streaming rate between two ranks of a host, and the float sum
  // rate of one core (output bytes), at each curve size (GB/s).
  double hopGBs[kCurvePoints] = {2, 5, 8, 10, 10, 8, 6, 6};
  double reduceGBs[kCurvePoints] = {8, 10, 10, 10, 8, 6, 5, 5};
  double memGBs = 12;           // copies on every core at once: the host's memory bandwidth
  double exchangeGBs = 5;       // two hops at once beyond the caches, each (64 MiB both ways)
  int cores = 4;                // online cores of the host
  double socketLatencyUs = 40;  // one TCP hop between hosts (assumed: not measured yet)
  double socketGBs = 1.1;       // one TCP hop's streaming rate between hosts (assumed)
  int hosts = 1;                // hosts the communicator spans (socket hops where > 1)
  bool measured = false;        // false: the defaults above
};

// The knobs of path choice and of the paths' limits, read once per
// communicator at init (docs/env.md has each one), and the machine facts the
// costs read, agreed at init.
struct SelectionConfig {
  NameList proto;  // LANES_PROTO: device paths
  NameList algo;   // LANES_ALGO: host algorithms
  MachineFacts machine;
  // LANES_LL_MAX_BYTES, at most kLlHardMaxBytes (LL rounds it to whole lines).
  static constexpr size_t kLlHardMaxBytes = size_t{256} << 10;
  size_t llMaxBytes = size_t{16} << 10;
  bool llSharedGpu = false;  // LANES_LL_SHARED_GPU: LL between processes on one GPU (MPS)
  size_t sharedContextMaxBytes = size_t{256} << 10;  // LANES_SHARED_CONTEXT_MAX_BYTES
  size_t sharedGpuProxyBytes = size_t{256} << 10;    // LANES_SHARED_GPU_PROXY_BYTES
  bool stagedGatherScatter = true;                   // LANES_STAGED_COLLECTIVES
  // Reads the variables above (exec/comm_config.cc); a bad value warns once
  // and leaves the default.
  static SelectionConfig fromEnv();
};

// The choice itself belongs to the layer above (planner/registry.h), which
// hands the device paths these two when it enqueues work on them.
struct PathChooser {
  DevicePath (*devicePath)(const CallFacts&, const SelectionConfig&);
  AlgoId (*hostAlgo)(const CallFacts&, const SelectionConfig&);
};

// Whether `config` lets `path` run (its LANES_PROTO name, on by default
// except LlThreads and P2pPairs).
bool pathAllowed(const SelectionConfig& config, DevicePath path);

}  // namespace lanes
