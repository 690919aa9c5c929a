// Fuzzes lanesUniqueId decoding: the 128 bytes a user hands every rank, which
// may arrive truncated, corrupt or from another build. A decoded id must
// re-encode to one that decodes identically.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"

using namespace lanes;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lanesUniqueId id;
  std::memset(&id, 0, sizeof(id));
  std::memcpy(id.internal, data, std::min(size, sizeof(id.internal)));
  UniqueIdData d;
  if (!decodeUniqueId(id, &d).isOk()) return 0;
  (void)wire::rootAddress(d).toString();
  lanesUniqueId again;
  if (!encodeUniqueId(d, &again).isOk()) std::abort();
  UniqueIdData d2;
  if (!decodeUniqueId(again, &d2).isOk()) std::abort();
  if (d.family != d2.family || d.port != d2.port || std::memcmp(d.addr, d2.addr, 16) != 0 ||
      std::memcmp(d.secret, d2.secret, 32) != 0 || d.commId != d2.commId)
    std::abort();
  return 0;
}
