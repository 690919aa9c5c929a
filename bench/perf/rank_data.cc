// RankRun's buffers: sizes per collective, the verifiable input pattern, and
// the count of wrong elements after a call.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "base/host_id.h"
#include "perf/backend_nccl.h"
#include "perf/bound_model.h"
#include "perf/element.h"
#include "perf/host_copy.h"
#include "perf/pattern.h"
#include "perf/rank_run.h"
#include "perf/report.h"
#include "perf/run_env.h"

namespace lanes::perf {

void RankRun::allocateBuffers() {
  // In place, the receive buffer also holds the input (reduce-scatter: all
  // of it; all-gather: at this rank's block), so it is sized for both forms.
  size_t sendBytes = 0, recvBytes = 0;
  for (lanesDataType_t t : a_.types) {
    CollCounts c = countsFor(a_.maxBytes, t);
    sendBytes = std::max(sendBytes, c.sendCount * elementSize(t));
    recvBytes = std::max(recvBytes, recvExtent(c, true) * elementSize(t));
  }
  if (setup_.memory == Memory::Device) {
    ok(makeDeviceMemory(sendBytes, recvBytes, &mem_, a_.streamNull != 0),
       "allocating device buffers");
  } else {
    ok(makeHostMemory(sendBytes, recvBytes, &mem_), "allocating host buffers");
  }
}

// Elements of the receive buffer a call touches: in place, the input's
// place (send offset) as well as the result's.
size_t RankRun::recvExtent(const CollCounts& c, bool inPlace) const {
  if (!inPlace) return c.recvCount;
  const size_t r = static_cast<size_t>(rank_);
  return std::max(c.sendInplaceOffset * r + c.sendCount, c.recvInplaceOffset * r + c.recvCount);
}

CollCounts RankRun::countsFor(uint64_t bytes, lanesDataType_t t) const {
  return spec_.counts(bytes / elementSize(t), nranks_);
}

// Inputs are written on the host (the mirrors) and, on device memory, copied
// up; the receive buffer is cleared so a result left by the last size or the
// other backend cannot pass the check.
void RankRun::fill(const CollCounts& c, const DataKey& key, bool inPlace) {
  const size_t ts = elementSize(key.type);
  const size_t extent = recvExtent(c, inPlace) * ts;
  std::memset(mem_->hostRecv(), 0, extent);
  uint8_t* send = inPlace ? mem_->hostRecv() + c.sendInplaceOffset * ts * static_cast<size_t>(rank_)
                          : mem_->hostSend();
  for (size_t i = 0; i < c.sendCount; ++i) storeElement(key.type, send, i, spec_.input(key, i));
  ok(mem_->upload(inPlace ? 0 : c.sendCount * ts, extent), "copying inputs to the GPU");
}

int64_t RankRun::countWrong(const CollCounts& c, const DataKey& key, bool inPlace) {
  const size_t ts = elementSize(key.type);
  ok(mem_->download(recvExtent(c, inPlace) * ts), "copying results from the GPU");
  uint8_t* recv = mem_->hostRecv();
  if (inPlace) recv += c.recvInplaceOffset * ts * static_cast<size_t>(rank_);
  // LANES_PERF_CORRUPT=1 (a test hook): the first result with a defined
  // value on the rank that has one (the root, or rank 0) is made wrong once.
  if (corruptPending_ && rank_ == (spec_.rooted ? a_.root : 0)) {
    for (size_t i = 0; i < c.recvCount; ++i) {
      if (auto e = spec_.expect(key, i)) {
        storeElement(key.type, recv, i, e->value + 1);
        corruptPending_ = false;
        break;
      }
    }
  }
  int64_t wrong = 0;
  for (size_t i = 0; i < c.recvCount; ++i) {
    auto e = spec_.expect(key, i);
    if (e && !matches(loadElement(key.type, recv, i), e->value, e->tolerance)) ++wrong;
  }
  return wrong;
}

}  // namespace lanes::perf
