// A group's small device sends and receives on the LL pair slots
// (kernels/cuda/ll_pairs.h): one kernel launch on the group's stream, no host
// thread, no copy engine (docs/gpu_data_path.md, "Small sends and receives").
#include "kernels/cuda/ll_pairs.h"

#include <algorithm>
#include <string>
#include <vector>

#include "base/cuda_check.h"
#include "exec/cuda/device_scope.h"
#include "exec/cuda/ll_allreduce.h"

namespace lanes {
namespace {

bool overlaps(const cuda::LlPairMessage& a, const cuda::LlPairMessage& b) {
  const auto* a0 = static_cast<const unsigned char*>(a.buf);
  const auto* b0 = static_cast<const unsigned char*>(b.buf);
  return a.bytes > 0 && b.bytes > 0 && a0 < b0 + b.bytes && b0 < a0 + a.bytes;
}

// Whether send `s` reads bytes that a receive of the group writes (in place,
// as the perf tools' send/recv does).
bool overwritten(const cuda::LlPairMessage& s, const std::vector<cuda::LlPairMessage>& messages) {
  return std::any_of(messages.begin(), messages.end(),
                     [&](const cuda::LlPairMessage& r) { return !r.send && overlaps(s, r); });
}

// Room a send's input takes in the scratch (each copy starts 256-byte aligned).
size_t asideBytes(size_t bytes) { return (bytes + 255) / 256 * 256; }

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
  const auto carried = std::count_if(messages.begin(), messages.end(),
                                     [](const cuda::LlPairMessage& m) { return m.bytes > 0; });
  if (carried > cuda::kLlPairMaxMessages)
    return invalidUsage("a group holds " + std::to_string(carried) +
                        " device sends and receives small enough for the LL pair slots; one "
                        "group takes at most " +
                        std::to_string(cuda::kLlPairMaxMessages) +
                        " of them. Split the group, or set LANES_PROTO=^ll_pairs");
  bool capturing = false;
  LANES_RETURN_IF_ERROR(orderAfterLast(stream, &capturing));
  // In place: the sends' inputs go aside first, so no receive waits for a
  // send (a send waiting for a slot could wait for that very receive, on
  // both ends). Past the scratch's size the receives wait in the kernel.
  std::vector<size_t> copied;  // the sends going aside, found before any buffer moves
  size_t aside = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!messages[i].send || !overwritten(messages[i], messages)) continue;
    copied.push_back(i);
    aside += asideBytes(messages[i].bytes);
  }
  const bool receivesWait = aside > kPairScratchBytes;
  size_t at = 0;
  for (size_t k = 0; k < copied.size() && !receivesWait; ++k) {
    cuda::LlPairMessage& m = messages[copied[k]];
    LANES_CUDA_RETURN(
        cudaMemcpyAsync(pairScratch_ + at, m.buf, m.bytes, cudaMemcpyDeviceToDevice, stream));
    m.buf = pairScratch_ + at;
    at += asideBytes(m.bytes);
  }
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
  const int rc = cuda::launchLlPairs(a, messages.data(), messages.size(), receivesWait, stream);
  LANES_RETURN_IF_ERROR(noteLaunch(rc, stream, capturing, "LL send/recv kernel"));
  pairMessages_ += messages.size();
  return Status::ok();
}

}  // namespace lanes
