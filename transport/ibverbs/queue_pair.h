// Reliable-connected queue pairs: made on an opened port and joined to a
// peer's queue pair through INIT, ready-to-receive and ready-to-send with
// the transport's knobs (traffic class, ack timeout, retry count).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "base/status.h"
#include "transport/ibverbs/ib_device.h"
#include "transport/ibverbs/verbs_handles.h"

namespace lanes::ib {

struct QpSettings {
  uint32_t sendDepth = 0;  // work requests in flight at most, each way
  uint32_t recvDepth = 0;
  uint32_t inlineBytes = 0;  // the least inline payload a send must take
  int trafficClass = 0;      // LANES_IB_TC
  int timeout = 20;          // LANES_IB_TIMEOUT
  int retryCount = 7;        // LANES_IB_RETRY_CNT
};

// A queue pair whose sends and receives complete on `cq`, in RESET.
Status createQueuePair(IbDevice& device, ibv_cq* cq, const QpSettings& settings,
                       Owned<ibv_qp>* out);

// Moves `qp` to ready-to-send, joined to `remote` (the smaller MTU of the
// two ports). Receives should be posted before the peer may write.
// *unreachable (where given) says whether it failed because this port finds
// no way to the peer's address (RoCE: no route, or no neighbour answers):
// a pair for another transport, not a broken setup.
Status connectQueuePair(IbDevice& device, ibv_qp* qp, const QpAddress& remote,
                        const QpSettings& settings, bool* unreachable = nullptr);

// Moves `qp` to the error state: its outstanding work completes flushed and
// the peer's next write to it fails.
void failQueuePair(ibv_qp* qp);

}  // namespace lanes::ib
