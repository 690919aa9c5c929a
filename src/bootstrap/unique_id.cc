// lanesUniqueId layout (128 bytes, little-endian):
//   0 magic "LNID"  4 version  6 family (4|6)  7 reserved  8 port
//  10 reserved     16 address (16 bytes)      32 secret (32 bytes)
//  64 commId       72..127 zero
#include <arpa/inet.h>

#include <cstring>

#include "bootstrap/bootstrap.h"

namespace lanes {
namespace {

constexpr uint32_t kIdMagic = 0x44494e4c;  // "LNID"
constexpr uint16_t kIdVersion = 1;

Status corrupt() {
  return invalidArgument(
      "the unique id is corrupt or from another Lanes version: pass every rank the bytes "
      "lanesGetUniqueId produced, unchanged, and run the same Lanes build everywhere");
}

}  // namespace

static_assert(sizeof(lanesUniqueId) == 128);

Status encodeUniqueId(const UniqueIdData& data, lanesUniqueId* out) {
  if (data.family != AF_INET && data.family != AF_INET6)
    return invalidArgument("cannot encode a unique id for address family " +
                           std::to_string(data.family) + " (only IPv4 and IPv6)");
  auto* b = reinterpret_cast<uint8_t*>(out->internal);
  std::memset(b, 0, sizeof(out->internal));
  std::memcpy(b + 0, &kIdMagic, 4);
  std::memcpy(b + 4, &kIdVersion, 2);
  b[6] = data.family == AF_INET ? 4 : 6;
  std::memcpy(b + 8, &data.port, 2);
  std::memcpy(b + 16, data.addr, 16);
  std::memcpy(b + 32, data.secret, 32);
  std::memcpy(b + 64, &data.commId, 8);
  return Status::ok();
}

Status decodeUniqueId(const lanesUniqueId& id, UniqueIdData* out) {
  const auto* b = reinterpret_cast<const uint8_t*>(id.internal);
  uint32_t magic;
  uint16_t version;
  std::memcpy(&magic, b + 0, 4);
  std::memcpy(&version, b + 4, 2);
  if (magic != kIdMagic || version != kIdVersion || (b[6] != 4 && b[6] != 6)) return corrupt();
  UniqueIdData d;
  d.family = b[6] == 4 ? AF_INET : AF_INET6;
  std::memcpy(&d.port, b + 8, 2);
  std::memcpy(d.addr, b + 16, 16);
  std::memcpy(d.secret, b + 32, 32);
  std::memcpy(&d.commId, b + 64, 8);
  if (d.port == 0) return corrupt();
  *out = d;
  return Status::ok();
}

}  // namespace lanes
