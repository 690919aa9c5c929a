// The machine's RDMA ports (InfiniBand, RoCE, soft-RoCE) as the kernel lists
// them in sysfs, which of them LANES_IB_HCA selects and which GID a RoCE port
// would use: what `lanes-topo` reports and the verbs transport will connect
// through. Read from sysfs, so no libibverbs is needed to tell what is there.
#pragma once

#include <string>
#include <vector>

namespace lanes::topo {

struct RdmaGid {
  int index = -1;
  std::string address;       // as the kernel prints it, e.g. "0000:...:ffff:0a4d:0001"
  std::string type;          // "RoCE v2", "IB/RoCE v1" (empty where the kernel has none)
  std::string netdev;        // the network device a RoCE GID belongs to
  bool ipv4() const;         // an IPv4-mapped address (::ffff:a.b.c.d)
  std::string text() const;  // ::ffff:10.77.0.1 for IPv4-mapped ones, else the address
};

struct RdmaPort {
  std::string device;         // "mlx5_0", "rxe0"
  int port = 0;               // from 1
  std::string state;          // "ACTIVE", "DOWN", "INIT", ...
  std::string linkLayer;      // "InfiniBand" or "Ethernet" (RoCE)
  std::string rate;           // "100 Gb/sec (4X EDR)"
  std::vector<RdmaGid> gids;  // the set (non-zero) entries of the GID table
  bool active() const { return state == "ACTIVE"; }
  bool roce() const { return linkLayer == "Ethernet"; }
};

// Every port of every device under `root` (sysfs' /sys/class/infiniband),
// devices and ports in order; empty where there is none.
std::vector<RdmaPort> readRdmaPorts(const std::string& root = "/sys/class/infiniband");

// Whether LANES_IB_HCA `spec` (NCCL's NCCL_IB_HCA syntax) selects `port` of
// `device`: a comma list of "name[:port]", names matching as prefixes, or
// exactly after a leading "=", and "^" before it all excluding instead. As in
// NCCL: a list without names (empty, "=", "^") matches every port, so "^"
// alone excludes them all; a port that is not a number is 0, matching none.
bool hcaSelects(const std::string& spec, const std::string& device, int port);

// The GID index a port's traffic uses: `forced` (LANES_IB_GID_INDEX) when it
// is 0 or more and set on the port (else -1); on InfiniBand 0; on RoCE the first RoCE v2 GID
// holding an IPv4 address, else the first RoCE v2 GID, else -1 (none usable).
int chooseGid(const RdmaPort& port, int forced);

// The "RDMA ports" section of lanes-topo's report: `verbs` (whether
// libibverbs loads, or why not), then each port, its state, link layer, rate
// and GIDs, and whether LANES_IB_HCA selects it, with the GID it would use.
std::string formatRdmaPorts(const std::vector<RdmaPort>& ports, const std::string& hcaSpec,
                            int forcedGid, const std::string& verbs);

}  // namespace lanes::topo
