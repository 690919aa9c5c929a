// Host-memory ranks: the library reads and writes the mirrors themselves.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "perf/memory.h"

namespace lanes::perf {
namespace {

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};
using HostBuffer = std::unique_ptr<uint8_t, FreeDeleter>;

// Page-aligned and zeroed (touched), so first-use page faults stay out of timing.
Status allocateHost(size_t bytes, HostBuffer* out) {
  size_t rounded = std::max<size_t>(4096, (bytes + 4095) / 4096 * 4096);
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(4096, rounded));
  if (p == nullptr) {
    return systemError("could not allocate " + std::to_string(bytes) +
                       " bytes of host memory; lower -e (maxbytes).");
  }
  std::memset(p, 0, rounded);
  out->reset(p);
  return Status::ok();
}

class HostMemory final : public RankMemory {
 public:
  Status init(size_t sendBytes, size_t recvBytes) {
    LANES_RETURN_IF_ERROR(allocateHost(sendBytes, &sendBuf_));
    LANES_RETURN_IF_ERROR(allocateHost(recvBytes, &recvBuf_));
    send_ = hostSend_ = sendBuf_.get();
    recv_ = hostRecv_ = recvBuf_.get();
    return Status::ok();
  }

 private:
  HostBuffer sendBuf_, recvBuf_;
};

}  // namespace

Status makeHostMemory(size_t sendBytes, size_t recvBytes, std::unique_ptr<RankMemory>* out) {
  auto m = std::make_unique<HostMemory>();
  LANES_RETURN_IF_ERROR(m->init(sendBytes, recvBytes));
  *out = std::move(m);
  return Status::ok();
}

}  // namespace lanes::perf
