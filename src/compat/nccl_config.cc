// ncclConfig_t, read by the size the caller's header gave it: a program built
// against an older nccl.h passes a shorter struct.
#include <cstddef>
#include <mutex>
#include <string>

#include "base/log.h"
#include "compat/nccl_convert.h"

namespace lanes::compat {
namespace {

constexpr unsigned kNcclConfigMagic = 0xcafebeef;

template <typename T>
bool present(const ncclConfig_t* c, const T ncclConfig_t::*field) {
  static const ncclConfig_t probe{};
  const size_t offset = static_cast<size_t>(reinterpret_cast<const char*>(&(probe.*field)) -
                                            reinterpret_cast<const char*>(&probe));
  return c->size >= offset + sizeof(T);
}

void noteIgnored(const ncclConfig_t* c) {
  std::string list;
  auto note = [&](const char* name, const int ncclConfig_t::*field) {
    if (present(c, field) && c->*field != NCCL_CONFIG_UNDEF_INT)
      list += std::string(list.empty() ? "" : ", ") + name + "=" + std::to_string(c->*field);
  };
  note("cgaClusterSize", &ncclConfig_t::cgaClusterSize);
  note("minCTAs", &ncclConfig_t::minCTAs);
  note("maxCTAs", &ncclConfig_t::maxCTAs);
  note("splitShare", &ncclConfig_t::splitShare);
  note("trafficClass", &ncclConfig_t::trafficClass);
  note("collnetEnable", &ncclConfig_t::collnetEnable);
  note("CTAPolicy", &ncclConfig_t::CTAPolicy);
  note("shrinkShare", &ncclConfig_t::shrinkShare);
  note("nvlsCTAs", &ncclConfig_t::nvlsCTAs);
  note("nChannelsPerNetPeer", &ncclConfig_t::nChannelsPerNetPeer);
  note("nvlinkCentricSched", &ncclConfig_t::nvlinkCentricSched);
  if (present(c, &ncclConfig_t::netName) && c->netName != nullptr)
    list += std::string(list.empty() ? "" : ", ") + "netName=" + c->netName;
  if (list.empty()) return;
  static std::once_flag once;
  std::call_once(once, [&] {
    LANES_INFO(Init, -1,
               "ncclConfig_t fields accepted with no effect (Lanes has no CTAs, NVLS, CollNet or "
               "shared resources between communicators): %s",
               list.c_str());
  });
}

}  // namespace

Status toLanesConfig(const ncclConfig_t* in, lanesConfig_t* out) {
  *out = lanesConfig_t LANES_CONFIG_INITIALIZER;
  if (in == nullptr) return Status::ok();
  if (in->magic != kNcclConfigMagic || in->size < offsetof(ncclConfig_t, blocking) + sizeof(int))
    return invalidArgument(
        "config was not initialised with NCCL_CONFIG_INITIALIZER (bad magic or size); start "
        "from `ncclConfig_t config = NCCL_CONFIG_INITIALIZER;`");
  if (in->blocking != NCCL_CONFIG_UNDEF_INT) out->blocking = in->blocking;
  if (present(in, &ncclConfig_t::commName)) out->commName = in->commName;
  noteIgnored(in);
  return Status::ok();
}

void announce() {
  static std::once_flag once;
  std::call_once(once, [] {
    LANES_INFO(Init, -1, "Lanes %d.%d.%d serving the NCCL %d.%d.%d API (libnccl.so.2 drop-in)",
               LANES_MAJOR, LANES_MINOR, LANES_PATCH, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
  });
}

}  // namespace lanes::compat
