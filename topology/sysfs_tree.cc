// A model from sysfs alone, for machines without hwloc: packages and NUMA
// nodes from /sys/devices/system, and for each GPU and NIC the chain of
// bridges its device path names (/sys/devices/pci0000:00/0000:00:01.0/...).
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "topology/discovery.h"
#include "topology/sysfs_pci.h"

namespace lanes::topo {

namespace fs = std::filesystem;

namespace {

bool isBusId(const std::string& s) {
  return s.size() == 12 && s[4] == ':' && s[7] == ':' && s[10] == '.';
}

int firstCpu(const std::string& list) { return list.empty() ? -1 : std::atoi(list.c_str()); }

void cpusAndNuma(const std::string& root, Topology* t) {
  std::error_code ec;
  std::string sys = root + "/devices/system";
  std::map<int, int> packageOfCpu;
  std::set<std::pair<int, int>> cores;
  for (const auto& e : fs::directory_iterator(sys + "/cpu", ec)) {
    std::string name = e.path().filename();
    if (name.size() < 4 || name.compare(0, 3, "cpu") != 0 || !isdigit(name[3])) continue;
    std::string pkg = readLine(e.path().string() + "/topology/physical_package_id");
    if (pkg.empty()) continue;
    int cpu = std::atoi(name.c_str() + 3);
    packageOfCpu[cpu] = std::atoi(pkg.c_str());
    cores.insert(
        {packageOfCpu[cpu], std::atoi(readLine(e.path().string() + "/topology/core_id").c_str())});
  }
  t->pus = static_cast<int>(packageOfCpu.size());
  t->cores = static_cast<int>(cores.size());
  std::map<int, int> packageNode;
  auto package = [&](int os) {
    if (!packageNode.count(os)) {
      packageNode[os] = t->addNode(NodeKind::Package, 0);
      t->nodes[packageNode[os]].osIndex = os;
    }
    return packageNode[os];
  };
  for (const auto& [cpu, pkg] : packageOfCpu) package(pkg);
  std::map<int, std::string> numaCpus;
  for (const auto& e : fs::directory_iterator(sys + "/node", ec)) {
    std::string name = e.path().filename();
    if (name.size() > 4 && name.compare(0, 4, "node") == 0 && isdigit(name[4]))
      numaCpus[std::atoi(name.c_str() + 4)] = readLine(e.path().string() + "/cpulist");
  }
  for (const auto& [os, cpus] : numaCpus) {
    int cpu = firstCpu(cpus);
    int parent = packageOfCpu.count(cpu) ? package(packageOfCpu[cpu]) : 0;
    int n = t->addNode(NodeKind::Numa, parent);
    t->nodes[n].osIndex = os;
    t->nodes[n].name = cpus;
  }
}

int numaNodeIndex(const Topology& t, int os) {
  for (size_t i = 0; i < t.nodes.size(); ++i)
    if (t.nodes[i].kind == NodeKind::Numa && t.nodes[i].osIndex == os) return static_cast<int>(i);
  return t.packageCount() == 1 ? 1 : 0;  // the only package, else the machine
}

}  // namespace

Status discoverSysfsTree(const std::string& root, Topology* out) {
  Topology t;
  t.addNode(NodeKind::Machine, -1);
  cpusAndNuma(root, &t);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root + "/bus/pci/devices", ec)) {
    std::string dir = e.path().string();
    long cls = std::strtol(readLine(dir + "/class").c_str(), nullptr, 16);
    long vendor = std::strtol(readLine(dir + "/vendor").c_str(), nullptr, 16);
    bool gpu = (cls >> 16) == 0x03 && vendor == 0x10de;
    bool nic = (cls >> 16) == 0x02 || (cls >> 8) == 0x0c06;
    if (!gpu && !nic) continue;
    fs::path real = fs::canonical(e.path(), ec);
    if (ec) continue;
    int numa = std::atoi(readLine(dir + "/numa_node").c_str());
    int parent = numaNodeIndex(t, numa);
    for (const auto& part : real) {
      std::string p = part.string();
      if (p.size() == 10 && p.compare(0, 3, "pci") == 0) {  // "pci0000:00": a host bridge
        std::string id = p.substr(3);
        int n = t.findBus(id);
        if (n < 0) {
          n = t.addNode(NodeKind::HostBridge, parent);
          t.nodes[n].busId = id;
        }
        parent = n;
      } else if (isBusId(p) && p != e.path().filename().string()) {
        int n = t.findBus(p);
        if (n < 0) {
          n = t.addNode(NodeKind::Bridge, parent);
          t.nodes[n].busId = p;
        }
        parent = n;
      }
    }
    std::string bus = e.path().filename();
    int node = t.addNode(gpu ? NodeKind::Gpu : NodeKind::Nic, parent);
    t.nodes[node].busId = bus;
    if (gpu) {
      Gpu g;
      g.node = node;
      g.busId = bus;
      t.gpus.push_back(g);
    } else {
      Nic n;
      n.node = node;
      n.busId = bus;
      for (const auto& d : fs::directory_iterator(dir + "/net", ec)) n.netdev = d.path().filename();
      for (const auto& d : fs::directory_iterator(dir + "/infiniband", ec))
        n.rdma = d.path().filename();
      n.name = !n.rdma.empty() ? n.rdma : (!n.netdev.empty() ? n.netdev : bus);
      t.nics.push_back(n);
    }
  }
  t.resizeMatrices();
  t.sources.push_back("sysfs-tree");
  *out = std::move(t);
  return Status::ok();
}

}  // namespace lanes::topo
