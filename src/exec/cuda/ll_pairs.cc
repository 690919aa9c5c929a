// A group's small device sends and receives on the LL pair slots
// (kernels/cuda/ll_pairs.h): one kernel launch on the group's stream, no host
// thread, no copy engine (docs/gpu_data_path.md, "Small sends and receives").
#include "kernels/cuda/ll_pairs.h"

#include <algorithm>
#include <vector>

#include "exec/cuda/device_scope.h"
#include "exec/cuda/ll_allreduce.h"

namespace lanes {
namespace {

// Whether a receive's output overlaps a send's input of the group (in place,
// as the perf tools' send/recv does): the sends must have read their inputs
// before the receives write.
bool receivesOverlapSends(const std::vector<cuda::LlPairMessage>& messages) {
  for (const cuda::LlPairMessage& r : messages) {
    if (r.send || r.bytes == 0) continue;
    const auto* r0 = static_cast<const unsigned char*>(r.buf);
    for (const cuda::LlPairMessage& s : messages) {
      if (!s.send || s.bytes == 0) continue;
      const auto* s0 = static_cast<const unsigned char*>(s.buf);
      if (r0 < s0 + s.bytes && s0 < r0 + r.bytes) return true;
    }
  }
  return false;
}

}  // namespace

Status LlAllReduce::enqueuePairs(const std::vector<Request>& pairs, cudaStream_t stream) {
  if (pairs.empty()) return Status::ok();
  if (!pairsEnabled())
    return Status(lanesInternalError, "send/recv routed to LL pair slots that are not set up");
  DeviceScope device(comm_.cudaDev());
  std::vector<cuda::LlPairMessage> messages;
  messages.reserve(pairs.size());
  for (const Request& r : pairs) {
    cuda::LlPairMessage m;
    m.send = r.isSend;
    m.peer = r.peer;
    m.buf = r.isSend ? r.sendbuf : r.recvbuf;
    m.bytes = r.bytes;
    messages.push_back(m);
  }
  bool capturing = false;
  LANES_RETURN_IF_ERROR(orderAfterLast(stream, &capturing));
  cuda::LlPairArgs a;
  a.rank = comm_.rank();
  a.nranks = comm_.nranks();
  auto* region = static_cast<unsigned char*>(arena_->device()) + pairRegion_;
  a.slots = region;
  a.slotBytes = cuda::llPairSlotBytes(pairMaxBytes_);
  a.acks = region + cuda::llPairAckOffset(a.nranks, pairMaxBytes_);
  a.state = state_;
  a.control = controlDevice_;
  a.timeoutNs = kernelTimeoutNs();
  a.maxStreams = pairMaxStreams_;
  const int rc = cuda::launchLlPairs(a, messages.data(), messages.size(),
                                     receivesOverlapSends(messages), stream);
  LANES_RETURN_IF_ERROR(noteLaunch(rc, stream, capturing, "LL send/recv kernel"));
  pairMessages_ += messages.size();
  return Status::ok();
}

}  // namespace lanes
