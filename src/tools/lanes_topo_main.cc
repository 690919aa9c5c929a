// lanes-topo: what Lanes sees of this machine (or of a machine described by
// a file): the GPU/NIC matrix in nvidia-smi's form, per-GPU placement and
// link training, optional bandwidth/P2P probes, and warnings with fixes.
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string>

#include "base/env.h"
#include "base/log.h"
#include "base/socket.h"
#include "core/gpu_latency_probe.h"
#include "core/host_probe.h"
#include "core/ib_port_choice.h"
#include "core/socket_interface_choice.h"
#include "tools/lanes_topo_plan.h"
#include "topology/discovery.h"
#include "topology/import_nvidia_smi.h"
#include "topology/json_io.h"
#include "topology/probe.h"
#include "topology/rdma_ports.h"
#include "topology/report.h"
#ifdef LANES_HAVE_IBVERBS
#include "transport/ibverbs/verbs_library.h"
#endif

using namespace lanes;
using namespace lanes::topo;

namespace {

const char kUsage[] =
    "usage: lanes-topo [--json] [--probe]\n"
    "                  [--plan [--ranks N] [--hosts H] [--threads] [--mps|--no-mps]\n"
    "                  [--collective C]]\n"
    "                  [--topology FILE | --load FILE | --import-hwloc FILE |\n"
    "                  --import-nvidia-smi FILE] [--no-hwloc] [--no-nvml] [--help] [--version]\n"
    "  (no option)              discover this machine and print the report\n"
    "  --json                   print the model as JSON (what LANES_TOPO_FILE loads)\n"
    "  --probe                  measure the host path (a shared-memory hop, the CPU's\n"
    "                           reduction rate, memory bandwidth) and, with GPUs, H2D/D2H/\n"
    "                           both-ways per GPU and by copy size, a stream flag's and a\n"
    "                           kernel launch's latency, all GPUs at once, and P2P\n"
    "                           correctness and bandwidth per pair; cached in\n"
    "                           LANES_TOPO_CACHE, where every communicator's cost model\n"
    "                           reads them\n"
    "  --plan                   after the report: where each collective would run, by size,\n"
    "                           from the function every call asks (LANES_PROTO, LANES_ALGO),\n"
    "                           with the cost model's inputs; with --json, the plan as JSON\n"
    "                           (every host algorithm's and device path's predicted time)\n"
    "  --ranks N, -n N          ranks for --plan (default: one per GPU, at least 2)\n"
    "  --hosts H                --plan for ranks spread over H hosts like this one, in\n"
    "                           blocks, talking TCP between hosts (default 1)\n"
    "  --threads                --plan for ranks that are threads of one process (default:\n"
    "                           processes), rank r on GPU r % GPUs\n"
    "  --mps, --no-mps          --plan for processes sharing a GPU under MPS, or without\n"
    "                           (default: as CUDA says of this machine's GPU; imported: no)\n"
    "  --collective C           --plan for one collective (allreduce, allgather, ...), size\n"
    "                           by size, each host choice explained\n"
    "  --topology FILE          plan another machine: its lanes-topo --json, hwloc XML or\n"
    "                           nvidia-smi topo -m text (the format is read from the file)\n"
    "  --load FILE              a JSON model (lanes-topo --json, LANES_TOPO_DUMP_FILE)\n"
    "  --import-hwloc FILE      hwloc XML (`lstopo --of xml` on the other machine);\n"
    "                           needs a build with hwloc\n"
    "  --import-nvidia-smi FILE the text of `nvidia-smi topo -m`\n"
    "  --no-hwloc               discover without hwloc: the CPU/PCIe tree from sysfs\n"
    "  --no-nvml                discover without NVML: BAR1 size, the driver's P2P\n"
    "                           status and NVLink stay unknown\n"
    "  -h, --help               this text, then what this build has (as --version)\n"
    "  --version                the version and the optional pieces of this build\n";

#ifndef LANES_BUILT_HWLOC  // set by the top-level CMakeLists.txt
#define LANES_BUILT_HWLOC "hwloc: unknown"
#define LANES_BUILT_CUDA "CUDA: unknown"
#define LANES_BUILT_MPI "MPI: unknown"
#define LANES_VERSION_TEXT "unknown"
#endif

// What this build has and lacks; NVML is the driver's library, so it is
// looked for now, where discovery would load it.
std::string buildPieces() {
  std::string nvml = "NVML: libnvidia-ml.so.1 ";
  if (void* lib = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL)) {
    dlclose(lib);
    nvml += "loads here";
  } else {
    nvml +=
        "is not loadable here (no NVIDIA driver?), so BAR1 size, the driver's P2P status "
        "and NVLink are unknown";
  }
  return std::string("  ") + LANES_BUILT_HWLOC + "\n  " + LANES_BUILT_CUDA + "\n  " +
         LANES_BUILT_MPI + "\n  " + nvml + "\n";
}

std::string versionText() {
  return std::string("lanes-topo (Lanes ") + LANES_VERSION_TEXT + ")\n" + buildPieces();
}

// A line per GPU of `t` saying what `choice(cudaIndex)` picks for a rank
// there, or one for a rank without a GPU where `t` has none.
std::string perGpuLines(const Topology& t, const std::function<std::string(int)>& choice) {
  std::string out;
  for (const Gpu& g : t.gpus) {
    if (g.cudaIndex < 0) continue;
    out += "    GPU " + std::to_string(g.cudaIndex) + " (" + g.busId + "): " + choice(g.cudaIndex) +
           "\n";
  }
  return out.empty() ? "    a rank without a GPU: " + choice(-1) + "\n" : out;
}

// The port the verbs transport would pick for a rank on each GPU of `t`
// (or without one), as a communicator does (core/ib_port_choice.h).
std::string verbsChoiceLines(const std::vector<RdmaPort>& ports, const Topology& t) {
  IbConfig ib;
  ib.disabled = envBool("LANES_IB_DISABLE", false);
  ib.hca = envString("LANES_IB_HCA").value_or("");
  ib.forcedGid = static_cast<int>(envInt("LANES_IB_GID_INDEX", -1, -1, 255));
  auto choice = [&](int cudaDev) {
    chooseIbPort(ports, t, cudaDev, &ib);
    if (ib.device.empty()) return "TCP (" + ib.unavailable + ")";
    return ib.device + ":" + std::to_string(ib.port) +
           (ib.gidIndex >= 0 ? " (GID " + std::to_string(ib.gidIndex) + ")" : "");
  };
  return "  verbs transport, ranks of other hosts reached from:\n" + perGpuLines(t, choice) +
         "  device buffers: staged through host memory (the NIC does not read GPU memory "
         "directly yet)\n";
}

// This machine's RDMA ports and what LANES_IB_HCA / LANES_IB_GID_INDEX make of them.
std::string rdmaSection(const Topology& t) {
#ifdef LANES_HAVE_IBVERBS
  const ib::VerbsLibrary& verbs = ib::VerbsLibrary::get();
  const std::string library = verbs.ok() ? "loaded (libibverbs.so.1)" : verbs.why();
#else
  const std::string library = "not in this build (built without libibverbs-dev's headers)";
#endif
  const std::vector<RdmaPort> ports = readRdmaPorts();
  return formatRdmaPorts(ports, envString("LANES_IB_HCA").value_or(""),
                         static_cast<int>(envInt("LANES_IB_GID_INDEX", -1, -1, 255)), library) +
         verbsChoiceLines(ports, t);
}

// The interface the socket transport would listen on for a rank on each GPU
// of `t` (or without one), as a communicator between hosts picks it
// (core/socket_interface_choice.h).
std::string tcpSection(const Topology& t) {
  const std::string spec = envString("LANES_SOCKET_IFNAME").value_or("");
  std::string out =
      "TCP interfaces (LANES_SOCKET_IFNAME" + (spec.empty() ? " unset" : "=" + spec) + "):\n";
  std::vector<InterfaceAddress> interfaces;
  if (Status st = findInterfaces(spec, &interfaces); !st.isOk())
    return out + "  " + st.message() + "\n";
  out += "  candidates:";
  for (const InterfaceAddress& i : interfaces) {
    std::string address = i.address.toString();  // port 0: not bound yet
    if (address.ends_with(":0")) address.resize(address.size() - 2);
    out += " " + i.name + " (" + address + ")";
  }
  out += "\n  socket transport, ranks of other hosts reached from:\n";
  const InterfaceAddress& first = interfaces.front();
  auto choice = [&](int cudaDev) {
    if (!spec.empty()) return first.name + " (the first LANES_SOCKET_IFNAME selects)";
    const InterfaceChoice c = nearestInterface(interfaces, first.address.family(), t, cudaDev);
    if (c.name.empty())
      return first.name + " (the first candidate: none is nearer in the PCI tree)";
    return c.name + " (" + pathName(c.distance) + ")";
  };
  return out + perGpuLines(t, choice);
}

int fail(const Status& s) {
  std::fprintf(stderr, "lanes-topo: %s\n", s.message().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false, probe = false, plan = false;
  int planRanks = 0;
  int planHosts = 0;
  bool planThreads = false;
  std::optional<bool> planMps;
  std::optional<CollType> planColl;
  std::string load, hwlocXml, smi, topology;
  DiscoverOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    if (a == "--json")
      json = true;
    else if (a == "--probe")
      probe = true;
    else if (a == "--plan")
      plan = true;
    else if (a == "--threads")
      planThreads = true;
    else if (a == "--mps" || a == "--no-mps")
      planMps = a == "--mps";
    else if ((a == "-n" || a == "--ranks") && i + 1 < argc) {
      std::string n = argv[++i];
      int64_t v = 0;
      if (!parseInt64(n, &v) || v < 1 || v > 4096) {
        std::fprintf(stderr, "lanes-topo: %s %s is not a rank count (1..4096)\n", a.c_str(),
                     n.c_str());
        return 2;
      }
      planRanks = static_cast<int>(v);
    } else if (a == "--hosts" && i + 1 < argc) {
      std::string n = argv[++i];
      int64_t v = 0;
      if (!parseInt64(n, &v) || v < 1 || v > 4096) {
        std::fprintf(stderr, "lanes-topo: --hosts %s is not a host count (1..4096)\n", n.c_str());
        return 2;
      }
      planHosts = static_cast<int>(v);
    } else if (a == "--collective" && i + 1 < argc) {
      std::string name = argv[++i];
      CollType c;
      if (!parseCollTypeName(name, &c)) {
        std::fprintf(stderr,
                     "lanes-topo: --collective %s is not a collective (allreduce, allgather, "
                     "reducescatter, broadcast, reduce, alltoall, gather, scatter)\n",
                     name.c_str());
        return 2;
      }
      planColl = c;
    } else if (a == "--topology" && value(&topology)) {
    } else if (a == "--no-hwloc")
      options.hwloc = false;
    else if (a == "--no-nvml")
      options.nvml = false;
    else if (a == "--load" && value(&load)) {
    } else if (a == "--import-hwloc" && value(&hwlocXml)) {
    } else if (a == "--import-nvidia-smi" && value(&smi)) {
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::fputs(("\nThis build:\n" + buildPieces()).c_str(), stdout);
      return 0;
    } else if (a == "--version") {
      std::fputs(versionText().c_str(), stdout);
      return 0;
    } else {
      std::fprintf(stderr, "lanes-topo: unknown or incomplete option %s\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  if (!topology.empty()) {
    // The format from the first character that is not blank.
    std::string text;
    if (Status s = readTextFile(topology, &text); !s) return fail(s);
    const size_t at = text.find_first_not_of(" \t\r\n");
    const char first = at == std::string::npos ? '\0' : text[at];
    (first == '{' ? load : first == '<' ? hwlocXml : smi) = topology;
  }
  if ((!load.empty()) + (!hwlocXml.empty()) + (!smi.empty()) > 1) {
    std::fprintf(stderr,
                 "lanes-topo: give at most one of --topology, --load, --import-hwloc, "
                 "--import-nvidia-smi\n");
    return 2;
  }
  if ((planRanks > 0 || planHosts > 0 || planColl || planThreads || planMps) && !plan) {
    std::fprintf(
        stderr, "lanes-topo: --ranks, --hosts, --threads, --mps and --collective go with --plan\n");
    return 2;
  }
  if (planHosts > 1 && planThreads) {
    std::fprintf(stderr,
                 "lanes-topo: --threads plans the threads of one process, which is on one host; "
                 "leave out --hosts or --threads\n");
    return 2;
  }
  if (!hwlocXml.empty() && !hwlocAvailable()) {
    std::fprintf(stderr,
                 "lanes-topo: --import-hwloc needs hwloc, and this build has none. Install it "
                 "(Debian/Ubuntu: apt install libhwloc-dev pkg-config), then re-run cmake and "
                 "rebuild Lanes; meanwhile --import-nvidia-smi (the text of `nvidia-smi topo "
                 "-m`) or --load (lanes-topo --json run on that machine) import it.\n");
    return 1;
  }
  Topology t;
  bool live = load.empty() && hwlocXml.empty() && smi.empty();
  if (!load.empty()) {
    if (Status s = loadJsonFile(load, &t); !s) return fail(s);
  } else if (!hwlocXml.empty()) {
    if (Status s = importHwlocXml(hwlocXml, &t); !s) return fail(s);
  } else if (!smi.empty()) {
    if (Status s = importNvidiaSmiFile(smi, &t); !s) return fail(s);
  } else if (options.hwloc && options.nvml) {
    t = systemTopology();  // honours LANES_TOPO_FILE / _DUMP_FILE / _CACHE
  } else if (Status s = discover(options, &t); !s) {
    return fail(s);
  }
  if (probe) {
    if (!live) return fail(invalidUsage("--probe measures this machine; drop --load/--import"));
    t.probes.measuredBy = topo::Probes::kByTool;  // replaces what a first use measured
    std::fprintf(stderr, "lanes-topo: probing the host path...\n");
    if (Status s = measureHostProbe(t, &t.probes.host); !s) return fail(s);
    if (t.gpus.empty()) {
      std::fprintf(stderr, "lanes-topo: no GPU in this machine: the GPU probes are skipped\n");
    } else {
      std::fprintf(stderr, "lanes-topo: probing the GPUs (256 MiB copies, best of 5)...\n");
      if (Status s = runProbes(ProbeOptions{}, &t); !s) return fail(s);
      std::fprintf(stderr, "lanes-topo: timing stream flags and kernel launches...\n");
      if (Status s = measureGpuLatencies(&t); !s)
        std::fprintf(stderr, "lanes-topo: stream flag and launch latencies not measured: %s\n",
                     s.message().c_str());
    }
    std::string cache = probeCachePath();
    if (Status s = saveCachedProbes(cache, t); !s)
      std::fprintf(stderr, "lanes-topo: probe cache not written: %s\n", s.message().c_str());
    else if (!cache.empty())
      std::fprintf(stderr, "lanes-topo: probe results cached in %s\n", cache.c_str());
  }
  const int gpus = planGpus(t);
  const int hosts = std::max(1, planHosts);
  // Default: one rank per GPU of every host, at least 2 a host.
  const int ranks = planRanks > 0 ? planRanks : hosts * (gpus > 1 ? gpus : 2);
  if (hosts > ranks) {
    std::fprintf(stderr, "lanes-topo: --hosts %d leaves hosts without ranks (--ranks %d)\n", hosts,
                 ranks);
    return 2;
  }
  const PlanLaunch launch{planThreads, planMps, hosts};
  std::string text;
  if (plan && json)
    text = formatPlanJson(t, ranks, launch, planColl);
  else if (json)
    text = toJson(t).dump() + "\n";
  else
    text = formatReport(t) + (live ? rdmaSection(t) + tcpSection(t) : "") +
           (plan ? "\n" + formatPlanTable(t, ranks, launch, planColl) : "");
  std::fputs(text.c_str(), stdout);
  return 0;
}
