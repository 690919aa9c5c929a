#include "observe/nvtx_ranges.h"

#include <cstdlib>

#if LANES_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace lanes {

bool nvtxAttached() {
#if LANES_HAVE_NVTX
  static const bool attached = [] {
    const char* path = std::getenv("NVTX_INJECTION64_PATH");
    return path != nullptr && path[0] != '\0';
  }();
  return attached;
#else
  return false;
#endif
}

#if LANES_HAVE_NVTX
namespace {
nvtxDomainHandle_t domain() {
  static const nvtxDomainHandle_t d = nvtxDomainCreateA("Lanes");
  return d;
}
}  // namespace
#endif

bool nvtxPushRange(const char* message, uint64_t payload) {
  if (!nvtxAttached()) return false;
#if LANES_HAVE_NVTX
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = message;
  a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
  a.payload.ullValue = payload;
  nvtxDomainRangePushEx(domain(), &a);
  return true;
#else
  (void)message;
  (void)payload;
  return false;
#endif
}

void nvtxPopRange() {
#if LANES_HAVE_NVTX
  nvtxDomainRangePop(domain());
#endif
}

}  // namespace lanes
