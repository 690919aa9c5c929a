// The facts a path choice reads about one batch of calls (planner/registry.h
// chooses; the device paths state their part: exec/device_path.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "algorithms/algorithm.h"
#include "base/collective.h"
#include "base/name_list.h"
#include "kernels/cpu/wire_codec.h"

struct lanesComm;

namespace lanes {

// Where a batch of device-buffer calls runs. LlThreads is the LL kernel for
// ranks that are threads of one process: off unless named in LANES_PROTO (a
// spinning kernel can sit behind a peer thread's work in the shared context).
// Simple is the LL arena's mid-size kernel: a flag per chunk of 64 KiB
// written straight into mapped host memory (simple_collective.h).
// LlPairs carries one small send or receive in LL lines through the LL
// arena's pair slots (one kernel per group, ll_pairs.h).
// Pairs and P2pPairs carry one send or receive through the staged path's
// pair slots, in shared host memory or in the receiver's GPU memory over P2P
// (off unless named: where P2P is on, the slots then move to GPU memory).
// HostSum runs all-reduce and reduce-scatter through the staged path's slots
// in host memory, summed there by CPU threads (no GPU kernel).
enum class DevicePath : uint8_t {
  SharedContext,
  Ll,
  LlThreads,
  Simple,
  Staged,
  HostSum,
  Pairs,
  P2pPairs,
  LlPairs,
  Proxy
};
inline constexpr int kDevicePaths = 10;
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
  // Every call is a float32 sum (Sum, Avg, PreMulSum) that host summation
  // moves in this compressed format (LANES_WIRE; Native: uncompressed).
  WireFormat wire = WireFormat::Native;
  // The rank set.
  bool oneHost = true;
  bool threadRanks = false;             // some process holds several ranks
  bool threadsBesideProcesses = false;  // ... and other processes hold ranks too
  int ranksPerGpu = 1;                  // the most ranks on one GPU (they share its link)
  // The device paths as the ranks set them up and agreed at init.
  struct Limit {
    bool ready = false;
    size_t maxBytes = 0;
  };
  Limit sharedContext, ll;
  Limit simple;   // the simple kernel: posted bytes per rank up to maxBytes
  Limit llPairs;  // the LL pair slots: messages up to maxBytes
  // Ranks of different processes share a GPU that does not run MPS: every
  // hand-off between them on the GPU waits for a time slice.
  bool timeSliced = false;
  struct Staged {
    bool ready = false;
    bool gatherScatter = false;           // all-gather, broadcast, reduce-scatter too
    size_t proxyUpToBytes = 0;            // processes share a GPU: smaller batches take the proxy
    size_t slotBytes = size_t{16} << 20;  // LANES_STAGE_CHUNK_BYTES
    size_t pairChunkBytes = size_t{2} << 20;  // LANES_STAGE_PAIR_CHUNK_BYTES
    bool inGpuMemory = false;                 // the slots are in GPU memory (P2P), not host memory
    int hostSumThreads = 1;  // reducer threads per rank of host summation (agreed at init)
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
  // A later step of a call: once the ranks are in step, a hop costs less
  // than a ping-pong's (which is a whole call a leg). Assumed: the hop.
  double stepUs = 2;
  // A rooted call in a loop of them, which overlaps each call with the next
  // (the probe's two-rank direct broadcasts). Assumed (0): the call and a hop.
  double rootedUs = 0;
  double rootedCallUs() const { return rootedUs > 0 ? rootedUs : callUs + hopLatencyUs; }
  // A host-summation all-reduce of two ranks in a loop (the probe's, 8
  // bytes). Assumed (0): the call and two later steps.
  double sumUs = 0;
  double sumCallUs() const { return sumUs > 0 ? sumUs : callUs + 2 * stepUs; }
  // One hop's streaming rate between two ranks of a host, and the float sum
  // rate of one core (output bytes), at each curve size (GB/s).
  double hopGBs[kCurvePoints] = {2, 5, 8, 10, 10, 8, 6, 6};
  double reduceGBs[kCurvePoints] = {8, 10, 10, 10, 8, 6, 5, 5};
  // The compressed wire's codec on one core, ns per float32 value, [0]
  // bfloat16, [1] float8 e4m3: encoding, and decoding into a sum (assumed:
  // a 2-core x86 VM's, where the e4m3 encoder's frame maximum and scaled
  // rounding cost 15 times bfloat16's rounding).
  double wireEncodeNs[2] = {0.1, 1.35};
  double wireDecodeNs[2] = {0.25, 0.25};
  double memGBs = 12;      // copies on every core at once: the host's memory bandwidth
  double exchangeGBs = 5;  // two hops at once beyond the caches, each (64 MiB both ways)
  int cores = 4;           // online cores of the host
  // One TCP hop between hosts: the socket transport over loopback where
  // probed (its rate at most the fastest NIC's port speed), else assumed.
  double socketLatencyUs = 40;
  double socketGBs = 1.1;
  int hosts = 1;         // hosts the communicator spans (socket hops where > 1)
  int ranksPerHost = 0;  // ranks on each host where every host holds as many, else 0
  // On one host: the CPU packages its ranks sit on (their GPUs', or their
  // CPUs'), and the ranks on each where every package holds as many, else 0.
  int packages = 1;
  int ranksPerPackage = 0;
  // A hop between ranks on different packages of one host, where `lanes-topo
  // --probe` measured one (two packages, a rank pinned to each): half an
  // 8-byte round trip, and 16 MiB one way. 0: not measured (the costs then
  // take twice the hop's latency and half its 1 MiB rate, a socket link's).
  double crossPackageLatencyUs = 0;
  double crossPackageGBs = 0;
  bool measured = false;  // false: the defaults above
  // Rank 0's GPU as the device paths' cost model sees it (planner/device_costs.h):
  // copies between pinned host memory and the GPU, and within the GPU, back to
  // back on one stream at each curve size (GB/s), each direction's share of
  // its one-way rate while the other direction is busy too, copies between two
  // GPUs over P2P (the slowest pair probed), a counter written by one stream
  // and awaited by another through host memory (one way), and a small
  // kernel's launch. Assumed: a PCIe Gen4 x16 link and an RTX 4090's memory;
  // the flag and launch as the H200 measured them (docs/planner.md).
  struct Gpu {
    double h2dGBs[kCurvePoints] = {1.5, 5, 12, 18, 21, 22, 22, 22};
    double d2hGBs[kCurvePoints] = {1.5, 5, 12, 18, 21, 22, 22, 22};
    double d2dGBs[kCurvePoints] = {1.5, 6, 24, 80, 200, 350, 420, 450};
    double p2pGBs = 20;
    double bothWaysShare = 0.9;
    double flagUs = 3;
    double launchUs = 4;
    bool measured = false;
  } gpu;
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
  size_t llMaxBytes = kLlHardMaxBytes;
  // LANES_SIMPLE_MAX_BYTES, at most kSimpleHardMaxBytes (the simple kernel's
  // slots hold at most this a rank; large communicators get less).
  static constexpr size_t kSimpleHardMaxBytes = size_t{16} << 20;
  size_t simpleMaxBytes = size_t{4} << 20;
  bool llSharedGpu = false;  // LANES_LL_SHARED_GPU: LL between processes on one GPU (MPS)
  size_t sharedContextMaxBytes = size_t{256} << 10;  // LANES_SHARED_CONTEXT_MAX_BYTES
  size_t sharedGpuProxyBytes = size_t{256} << 10;    // LANES_SHARED_GPU_PROXY_BYTES
  bool stagedGatherScatter = true;                   // LANES_STAGED_COLLECTIVES
  WireFormat wire = WireFormat::Native;              // LANES_WIRE: float32 sums on the ring
  // Host summation of host buffers may be chosen: the communicator has its
  // shared arena (core/init.cc makes it where the ranks share one host).
  bool sharedSumUsable = true;
  // Reads the variables above (exec/comm_config.cc); a bad value warns once
  // and leaves the default.
  static SelectionConfig fromEnv();
};

// The choice itself belongs to the layer above (planner/registry.h), which
// hands the device paths these when it enqueues work on them.
struct PathChooser {
  DevicePath (*devicePath)(lanesComm*, const CallFacts&);
  AlgoId (*hostAlgo)(const CallFacts&, const SelectionConfig&);
  // The PLAN log's explanation of a device choice, once per kind and size class.
  void (*explainDevice)(lanesComm*, const CallFacts&);
};

// Whether `config` lets `path` run (its LANES_PROTO name, on by default
// except LlThreads and P2pPairs).
bool pathAllowed(const SelectionConfig& config, DevicePath path);

}  // namespace lanes
