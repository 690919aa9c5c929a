// NVML through dlopen, so one build runs where libnvidia-ml is absent. Only
// the handful of entry points the topology needs are declared here (their
// ABI has been stable since the _v2/_v3 names were introduced).
#include <dlfcn.h>

#include <memory>

#include "base/log.h"
#include "topology/discovery.h"

namespace lanes::topo {

namespace {

using nvmlReturn = int;
using nvmlDevice = struct nvmlDevice_st*;
struct nvmlPciInfo {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
struct nvmlBar1 {
  unsigned long long total, free, used;
};
constexpr int kP2pCapsRead = 0;  // NVML_P2P_CAPS_INDEX_READ
constexpr int kMaxNvLinks = 18;  // NVML_NVLINK_MAX_LINKS

struct Nvml {
  void* lib = nullptr;
  nvmlReturn (*init)() = nullptr;
  nvmlReturn (*shutdown)() = nullptr;
  nvmlReturn (*driverVersion)(char*, unsigned) = nullptr;
  nvmlReturn (*byBusId)(const char*, nvmlDevice*) = nullptr;
  nvmlReturn (*bar1)(nvmlDevice, nvmlBar1*) = nullptr;
  nvmlReturn (*curGen)(nvmlDevice, unsigned*) = nullptr;
  nvmlReturn (*maxGen)(nvmlDevice, unsigned*) = nullptr;
  nvmlReturn (*curWidth)(nvmlDevice, unsigned*) = nullptr;
  nvmlReturn (*maxWidth)(nvmlDevice, unsigned*) = nullptr;
  nvmlReturn (*p2pStatus)(nvmlDevice, nvmlDevice, int, int*) = nullptr;
  nvmlReturn (*nvlinkState)(nvmlDevice, unsigned, int*) = nullptr;
  nvmlReturn (*nvlinkRemote)(nvmlDevice, unsigned, nvmlPciInfo*) = nullptr;

  ~Nvml() {
    if (shutdown != nullptr) shutdown();
    if (lib != nullptr) dlclose(lib);
  }
  template <typename F>
  void sym(F* f, const char* name) {
    *f = reinterpret_cast<F>(dlsym(lib, name));
  }
  bool open(std::string* why) {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      *why =
          "NVML: libnvidia-ml.so.1 is not loadable (no NVIDIA driver?), so BAR1 size, "
          "driver P2P status and NVLink are unknown";
      return false;
    }
    sym(&init, "nvmlInit_v2");
    sym(&driverVersion, "nvmlSystemGetDriverVersion");
    sym(&byBusId, "nvmlDeviceGetHandleByPciBusId_v2");
    sym(&bar1, "nvmlDeviceGetBAR1MemoryInfo");
    sym(&curGen, "nvmlDeviceGetCurrPcieLinkGeneration");
    sym(&maxGen, "nvmlDeviceGetMaxPcieLinkGeneration");
    sym(&curWidth, "nvmlDeviceGetCurrPcieLinkWidth");
    sym(&maxWidth, "nvmlDeviceGetMaxPcieLinkWidth");
    sym(&p2pStatus, "nvmlDeviceGetP2PStatus");
    sym(&nvlinkState, "nvmlDeviceGetNvLinkState");
    sym(&nvlinkRemote, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    if (init == nullptr || byBusId == nullptr || init() != 0) {
      *why = "NVML: libnvidia-ml.so.1 loaded but nvmlInit_v2 failed (driver not running?)";
      init = nullptr;
      return false;
    }
    sym(&shutdown, "nvmlShutdown");
    return true;
  }
};

}  // namespace

void enrichFromNvml(Topology* t) {
  auto nvml = std::make_unique<Nvml>();
  std::string why;
  if (!nvml->open(&why)) {
    noteMissing(t, why);
    return;
  }
  t->sources.push_back("nvml");
  char version[96] = {};
  if (nvml->driverVersion && nvml->driverVersion(version, sizeof(version)) == 0)
    t->driverVersion = version;
  std::vector<nvmlDevice> dev(t->gpus.size(), nullptr);
  for (size_t i = 0; i < t->gpus.size(); ++i) {
    Gpu& g = t->gpus[i];
    if (nvml->byBusId(g.busId.c_str(), &dev[i]) != 0) {
      dev[i] = nullptr;
      continue;
    }
    nvmlBar1 bar{};
    if (nvml->bar1 && nvml->bar1(dev[i], &bar) == 0) g.bar1Bytes = bar.total;
    PciLink& l = t->nodes[g.node].link;
    unsigned v = 0;
    // sysfs is preferred (NVML reports the same); fill only what is unknown.
    if (l.curGen == 0 && nvml->curGen && nvml->curGen(dev[i], &v) == 0)
      l.curGen = static_cast<int>(v);
    if (l.maxGen == 0 && nvml->maxGen && nvml->maxGen(dev[i], &v) == 0)
      l.maxGen = static_cast<int>(v);
    if (l.curWidth == 0 && nvml->curWidth && nvml->curWidth(dev[i], &v) == 0)
      l.curWidth = static_cast<int>(v);
    if (l.maxWidth == 0 && nvml->maxWidth && nvml->maxWidth(dev[i], &v) == 0)
      l.maxWidth = static_cast<int>(v);
    if (l.known()) l.gbps = pcieGbps(l.curGen, l.curWidth);
  }
  t->resizeMatrices();
  for (size_t a = 0; a < dev.size(); ++a) {
    if (dev[a] == nullptr) continue;
    for (size_t b = 0; b < dev.size(); ++b) {
      int status = 0;
      if (a != b && dev[b] != nullptr && nvml->p2pStatus &&
          nvml->p2pStatus(dev[a], dev[b], kP2pCapsRead, &status) == 0 && t->p2p[a][b] < 0)
        t->p2p[a][b] = status == 0 ? 1 : 0;
    }
    for (unsigned link = 0; nvml->nvlinkState && link < kMaxNvLinks; ++link) {
      int active = 0;
      nvmlPciInfo remote{};
      if (nvml->nvlinkState(dev[a], link, &active) != 0 || !active) continue;
      if (!nvml->nvlinkRemote || nvml->nvlinkRemote(dev[a], link, &remote) != 0) continue;
      std::string peer = normalizeBusId(remote.busId);
      for (size_t b = 0; b < t->gpus.size(); ++b)
        if (t->gpus[b].busId == peer) ++t->nvlinks[a][b];
    }
  }
  LANES_INFO(Topo, -1, "NVML: driver %s, %zu GPUs matched", t->driverVersion.c_str(), dev.size());
}

}  // namespace lanes::topo
