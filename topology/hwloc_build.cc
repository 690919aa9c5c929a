// hwloc objects -> model. hwloc 2.x keeps NUMA nodes as memory children and
// PCI objects as I/O children of the CPU-side object they are local to; the
// model instead hangs host bridges under their NUMA node (or package), so
// the common ancestor of two devices names their path class directly.
#ifdef LANES_HAVE_HWLOC
#include "topology/hwloc_build.h"

#include <cstdio>
#include <cstdlib>
#include <map>

namespace lanes::topo {

namespace {

struct Builder {
  hwloc_topology_t h;
  Topology* t;
  std::map<unsigned, int> numaNode;  // OS index -> model node
  std::map<hwloc_obj_t, int> packageNode;

  std::string info(hwloc_obj_t o, const char* name) {
    const char* v = hwloc_obj_get_info_by_name(o, name);
    return v ? v : "";
  }
  static std::string busId(unsigned dom, unsigned bus, unsigned dev, unsigned fn) {
    char buf[32];
    snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", dom, bus, dev, fn);
    return buf;
  }
  static std::string cpuList(hwloc_const_bitmap_t set) {
    char buf[1024] = {};
    hwloc_bitmap_list_snprintf(buf, sizeof(buf), set);
    return buf;
  }
  int packageFor(hwloc_obj_t o) {
    for (; o != nullptr; o = o->parent)
      if (o->type == HWLOC_OBJ_PACKAGE && packageNode.count(o)) return packageNode[o];
    return 0;
  }
  // Where a host bridge below CPU-side object `o` hangs in the model.
  int cpuSideParent(hwloc_obj_t o) {
    if (o->nodeset != nullptr && hwloc_bitmap_weight(o->nodeset) == 1) {
      auto it = numaNode.find(static_cast<unsigned>(hwloc_bitmap_first(o->nodeset)));
      if (it != numaNode.end()) return it->second;
    }
    return packageFor(o);
  }
  void cpuSide(hwloc_obj_t o, int parent) {
    int here = parent;
    if (o->type == HWLOC_OBJ_PACKAGE) {
      here = t->addNode(NodeKind::Package, parent);
      t->nodes[here].osIndex = static_cast<int>(o->os_index);
      t->nodes[here].name = info(o, "CPUModel");
      packageNode[o] = here;
    }
    for (hwloc_obj_t m = o->memory_first_child; m != nullptr; m = m->next_sibling) {
      if (m->type != HWLOC_OBJ_NUMANODE) continue;
      int n = t->addNode(NodeKind::Numa, here);
      t->nodes[n].osIndex = static_cast<int>(m->os_index);
      t->nodes[n].name = cpuList(m->cpuset);
      numaNode[m->os_index] = n;
    }
    for (hwloc_obj_t c = o->first_child; c != nullptr; c = c->next_sibling) cpuSide(c, here);
  }
  void linkFromObj(hwloc_obj_t o, Node* n) {
    const auto& p = o->attr->pcidev;
    n->busId = busId(p.domain, p.bus, p.dev, p.func);
    n->vendor = p.vendor_id;
    n->device = p.device_id;
    n->link.gbps = p.linkspeed;
    // Hand-written fixtures (and Lanes' own exports) may carry the training.
    n->link.curGen = std::atoi(info(o, "LinkCurGen").c_str());
    n->link.curWidth = std::atoi(info(o, "LinkCurWidth").c_str());
    n->link.maxGen = std::atoi(info(o, "LinkMaxGen").c_str());
    n->link.maxWidth = std::atoi(info(o, "LinkMaxWidth").c_str());
    if (n->link.known()) n->link.gbps = pcieGbps(n->link.curGen, n->link.curWidth);
    n->acsRedirect = info(o, "ACSRedirect") == "1";
    n->chipset = info(o, "Chipset") == "1";
  }
  // Adds `o` and its I/O subtree; returns false (and adds nothing) when no
  // GPU or NIC lies below.
  bool io(hwloc_obj_t o, int parent) {
    size_t mark = t->nodes.size();
    int here = -1;
    bool keep = false;
    if (o->type == HWLOC_OBJ_BRIDGE) {
      const auto& b = o->attr->bridge;
      if (b.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
        here = t->addNode(NodeKind::HostBridge, parent);
        char buf[16];
        snprintf(buf, sizeof(buf), "%04x:%02x", b.downstream.pci.domain,
                 b.downstream.pci.secondary_bus);
        t->nodes[here].busId = buf;
      } else {
        here = t->addNode(NodeKind::Bridge, parent);
        Node n = t->nodes[here];
        linkFromObj(o, &n);
        t->nodes[here] = n;
      }
    } else if (o->type == HWLOC_OBJ_PCI_DEVICE) {
      unsigned cls = o->attr->pcidev.class_id;
      bool gpu = (cls >> 8) == 0x03 && o->attr->pcidev.vendor_id == 0x10de;
      bool nic = (cls >> 8) == 0x02 || cls == 0x0c06;
      if (!gpu && !nic) return false;
      here = t->addNode(gpu ? NodeKind::Gpu : NodeKind::Nic, parent);
      Node n = t->nodes[here];
      linkFromObj(o, &n);
      n.name = o->name ? o->name : info(o, "PCIDevice");
      t->nodes[here] = n;
      hwloc_obj_t local = hwloc_get_non_io_ancestor_obj(h, o);
      if (gpu) {
        Gpu g;
        g.node = here;
        g.busId = n.busId;
        g.name = n.name;
        if (local != nullptr && local->cpuset != nullptr) g.cpus = cpuList(local->cpuset);
        t->gpus.push_back(g);
      } else {
        Nic nic;
        nic.node = here;
        nic.busId = n.busId;
        for (hwloc_obj_t c = o->io_first_child; c != nullptr; c = c->next_sibling) {
          if (c->type != HWLOC_OBJ_OS_DEVICE || c->name == nullptr) continue;
          if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK) nic.netdev = c->name;
          if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) nic.rdma = c->name;
        }
        nic.name = !nic.rdma.empty() ? nic.rdma : (!nic.netdev.empty() ? nic.netdev : n.busId);
        t->nics.push_back(nic);
      }
      return true;
    } else {
      return false;
    }
    for (hwloc_obj_t c = o->io_first_child; c != nullptr; c = c->next_sibling)
      keep = io(c, here) || keep;
    if (!keep) t->nodes.resize(mark);
    return keep;
  }
  void ioBelow(hwloc_obj_t o) {
    for (hwloc_obj_t c = o->io_first_child; c != nullptr; c = c->next_sibling)
      io(c, cpuSideParent(o));
    for (hwloc_obj_t c = o->first_child; c != nullptr; c = c->next_sibling) ioBelow(c);
  }
  // hwloc's NVML backend records NVLink bandwidth (MB/s) between GPU OS
  // devices ("nvml0"); NVSwitch ports and POWER CPUs may share the matrix.
  int gpuOf(hwloc_obj_t o) {
    while (o != nullptr && o->type == HWLOC_OBJ_OS_DEVICE) o = o->parent;
    if (o == nullptr || o->type != HWLOC_OBJ_PCI_DEVICE) return -1;
    const auto& p = o->attr->pcidev;
    const std::string id = busId(p.domain, p.bus, p.dev, p.func);
    for (size_t g = 0; g < t->gpus.size(); ++g)
      if (t->gpus[g].busId == id) return static_cast<int>(g);
    return -1;
  }
  void nvlinkBandwidth() {
    unsigned nr = 1;
    hwloc_distances_s* d = nullptr;
    if (hwloc_distances_get_by_name(h, "NVLinkBandwidth", &nr, &d, 0) != 0 || nr == 0) return;
    for (unsigned a = 0; a < d->nbobjs; ++a)
      for (unsigned b = 0; b < d->nbobjs; ++b) {
        int ga = gpuOf(d->objs[a]), gb = gpuOf(d->objs[b]);
        if (ga >= 0 && gb >= 0 && ga != gb)
          t->nvlinkGbps[ga][gb] = static_cast<double>(d->values[a * d->nbobjs + b]) / 1000.0;
      }
    hwloc_distances_release(h, d);
  }
};

}  // namespace

void buildFromHwloc(hwloc_topology_t h, Topology* t) {
  *t = Topology{};
  hwloc_obj_t root = hwloc_get_root_obj(h);
  int machine = t->addNode(NodeKind::Machine, -1);
  if (const char* host = hwloc_obj_get_info_by_name(root, "HostName")) t->hostname = host;
  Builder b{h, t, {}, {}};
  b.cpuSide(root, machine);
  b.ioBelow(root);
  t->cores = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_CORE);
  t->pus = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_PU);
  t->resizeMatrices();
  b.nvlinkBandwidth();
}

}  // namespace lanes::topo
#endif  // LANES_HAVE_HWLOC
