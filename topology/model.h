// The topology model: a tree of the machine (packages, NUMA nodes, host
// bridges, PCIe bridges and switches) with GPUs and NICs at its leaves, plus
// what the GPU driver says about each GPU. Filled by discovery (hwloc, sysfs,
// NVML, CUDA) or by an import (JSON, hwloc XML, `nvidia-smi topo -m`);
// read by path classification, warnings, probes and the planner.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lanes::topo {

enum class NodeKind { Machine, Package, Numa, HostBridge, Bridge, Gpu, Nic, Other };
const char* kindName(NodeKind kind);
bool parseKind(const std::string& name, NodeKind* out);

// A PCIe link as the device's upstream port trained it. Generation 0 / width 0
// mean unknown; `gbps` is the usable bandwidth per direction in GB/s.
struct PciLink {
  int curGen = 0, curWidth = 0, maxGen = 0, maxWidth = 0;
  double gbps = 0;  // from gen x width where known, else what the source gave
  bool known() const { return curGen > 0 && curWidth > 0; }
  bool degraded() const {
    return (maxGen > 0 && curGen > 0 && curGen < maxGen) ||
           (maxWidth > 0 && curWidth > 0 && curWidth < maxWidth);
  }
};
// Per-direction GB/s of a PCIe link after line encoding (Gen1/2 8b/10b, Gen3+ 128b/130b).
double pcieGbps(int gen, int width);
// "16.0 GT/s PCIe" -> 4; 0 when not recognised.
int pcieGenFromSpeed(const std::string& text);

struct Node {
  NodeKind kind = NodeKind::Other;
  int parent = -1;    // index into Topology::nodes; -1 for the root
  int osIndex = -1;   // package / NUMA node number
  std::string busId;  // PCI "dddd:bb:dd.f" for PCI objects (host bridges: "dddd:bb")
  std::string name;   // model name, netdev name, ...
  uint16_t vendor = 0, device = 0;
  PciLink link;              // upstream link of PCI objects
  bool acsRedirect = false;  // bridge with ACS P2P request/completion redirect on
  bool chipset = false;      // bridge belongs to the chipset (PCH / Promontory)
};

struct Gpu {
  int node = -1;       // index into Topology::nodes
  int cudaIndex = -1;  // -1: not visible to CUDA in this process
  std::string busId, name;
  int numa = -1;
  std::string cpus;        // local CPU list, "0-15"
  uint64_t bar1Bytes = 0;  // 0 unknown
  uint64_t memBytes = 0;
};

struct Nic {
  int node = -1;
  std::string name;  // RDMA device ("mlx5_0") or netdev ("eth0")
  std::string netdev, rdma;
  std::string busId;
  int numa = -1;
  double gbps = 0;  // port speed when known
};

// Results of the on-request probes (topology/probe.h); empty until probed.
struct GpuProbe {
  int gpu = -1;                        // index into Topology::gpus
  double h2d = 0, d2h = 0, bidir = 0;  // GB/s; bidir = both directions summed
  // GB/s of back-to-back copies on one stream by copy size, HostProbe's sizes
  // (4 KiB x 4^i): the small sizes carry the fixed cost of a copy.
  std::vector<double> h2dCurve, d2hCurve;
  // ... and device to device within the GPU (where staging slots in GPU memory
  // put a copy); empty in caches from before this probe.
  std::vector<double> d2dCurve;
  double flagUs = 0;    // a counter in mapped host memory, one stream to another: one way
  double launchUs = 0;  // a one-thread kernel issued back to back on one stream, per launch
  bool curvesMeasured() const;
  bool latenciesMeasured() const { return flagUs > 0 && launchUs > 0; }
};
struct PairProbe {
  int a = -1, b = -1;  // indices into Topology::gpus
  bool advertised = false, tested = false, correct = false;
  double gbps = 0;
  std::string error;
};
// The host path's figures (the planner's MachineFacts): a hop of the
// shared-memory transport between two ranks, the CPU's reduction rate, both
// by message size (4 KiB x 4^i, i < kCurvePoints), the fixed cost of a call
// and the host's copy bandwidth with every core at work. Empty: not measured.
struct HostProbe {
  static constexpr int kCurvePoints = 8;  // 4 KiB .. 64 MiB
  double hopLatencyUs = 0;                // half the round trip of an 8-byte send/recv
  double callUs = 0;  // an 8-byte recursive-doubling all-reduce of two ranks, less one hop
  // One more step inside a call (a 2-rank ring all-reduce of 8 bytes less
  // recursive doubling's); 0: not measured (caches from before it: the hop).
  double stepUs = 0;
  // A rooted call in a loop of them (two ranks' 8-byte direct broadcasts,
  // back to back: the root moves on while its peer receives); 0: not
  // measured (caches from before it: the call and a hop).
  double rootedUs = 0;
  // An 8-byte host-summation all-reduce of two ranks in a loop (its two
  // hand-offs through the shared arena and the call); 0: not measured (the
  // host has no arena, or a cache from before it: the call and two steps).
  double sumUs = 0;
  std::vector<double> hopGBs;     // bytes over (half a round trip less the latency)
  std::vector<double> reduceGBs;  // float sum on one core, output bytes
  double memGBs = 0;              // memcpy on every core at once, aggregate
  double exchangeGBs = 0;         // 64 MiB both ways at once, per direction
  // The socket transport over loopback: the TCP stack's share of a hop
  // between hosts (half an 8-byte round trip; 16 MiB one way). 0: not measured.
  double tcpLatencyUs = 0, tcpGBs = 0;
  // The compressed wire formats' CPU codec on one core (kernels/cpu/wire_codec.h),
  // ns per float32 value: encoding, and decoding added into a sum; [0] bfloat16,
  // [1] float8 e4m3. 0: not measured.
  double wireEncodeNs[2] = {0, 0}, wireDecodeNs[2] = {0, 0};
  // A hop between two ranks pinned to different CPU packages (where there
  // are two): half an 8-byte round trip; 16 MiB one way. 0: not measured.
  double crossPackageLatencyUs = 0, crossPackageGBs = 0;
  bool measured() const {
    return hopLatencyUs > 0 && memGBs > 0 && exchangeGBs > 0 && hopGBs.size() == kCurvePoints &&
           reduceGBs.size() == kCurvePoints;
  }
};
inline bool GpuProbe::curvesMeasured() const {
  return h2dCurve.size() == HostProbe::kCurvePoints && d2hCurve.size() == HostProbe::kCurvePoints;
}
struct Probes {
  std::vector<GpuProbe> gpus;
  std::vector<PairProbe> pairs;
  double allH2d = 0, allD2h = 0;  // all GPUs at once, aggregate GB/s
  HostProbe host;
  // Who measured: kByTool, or kAtFirstUse (one GPU, no pairs); caches from
  // before the field read as the tool.
  static constexpr const char* kByTool = "lanes-topo --probe";
  static constexpr const char* kAtFirstUse = "first use";
  std::string measuredBy = kByTool;
  size_t copyBytes = 0;  // the large GPU copies' size; 0: unknown (caches from before: 256 MiB)
  bool empty() const { return gpus.empty() && pairs.empty() && !host.measured(); }
};

enum class IommuMode { Unknown, Off, Translating, Passthrough };
const char* iommuName(IommuMode m);

struct Topology {
  std::string hostname;
  std::vector<Node> nodes;  // nodes[0] is the Machine
  std::vector<Gpu> gpus;
  std::vector<Nic> nics;
  int cores = 0, pus = 0;
  std::string driverVersion;
  IommuMode iommu = IommuMode::Unknown;
  // p2p[a][b]: 1 advertised (CUDA/NVML), 0 not, -1 unknown. nvlinks[a][b]: link count.
  std::vector<std::vector<int>> p2p, nvlinks;
  // nvlinkGbps[a][b]: NVLink bandwidth a -> b in GB/s (hwloc's NVLinkBandwidth
  // matrix), 0 unknown or none.
  std::vector<std::vector<double>> nvlinkGbps;
  std::vector<std::string> sources;  // what filled this model: "hwloc", "sysfs", ...
  std::vector<std::string> missing;  // sentences: which source was absent and why
  Probes probes;

  int addNode(NodeKind kind, int parent);
  std::vector<int> ancestors(int node) const;  // node, parent, ..., root
  int numaOf(int node) const;                  // OS index of the enclosing NUMA node, -1
  int packageOf(int node) const;
  std::vector<int> children(int node) const;
  int findBus(const std::string& busId) const;  // node index or -1
  int numaCount() const;
  int packageCount() const;
  void resizeMatrices();  // p2p/nvlinks/nvlinkGbps to gpus.size() square, unknown/zero filled
};

// "0000:19:00.0" in lower case, domain filled in ("19:00.0" -> "0000:19:00.0").
std::string normalizeBusId(const std::string& busId);

}  // namespace lanes::topo
