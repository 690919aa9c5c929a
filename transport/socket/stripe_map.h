// StripeMap: which of a peer's sockets carries which bytes of a lane's stream.
//
// A lane's stream is cut into fixed stripes by stream offset; stripe k of
// lane l travels on socket (k + l) mod S. Both ends compute the same map, so
// no sequence numbers cross the wire and the receiver places each byte at
// its stream offset. A socket walks its own stripes in order, so its cursor
// (next byte it moves) only grows, and every byte below the minimum cursor
// over all sockets has been moved: that minimum is the in-order prefix.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lanes {

struct StripeMap {
  uint64_t stripe = 0;  // bytes per stripe
  int sockets = 1;

  // Stream offset of the first byte socket `s` carries for `lane`.
  uint64_t firstOffset(int lane, int s) const {
    int k0 = ((s - lane) % sockets + sockets) % sockets;
    return static_cast<uint64_t>(k0) * stripe;
  }
  // End of the stripe holding `offset` (frames never cross it).
  uint64_t stripeEnd(uint64_t offset) const { return (offset / stripe + 1) * stripe; }
  // Cursor after moving bytes up to `offset`: at a stripe's end it jumps to
  // the start of this socket's next stripe.
  uint64_t advance(uint64_t offset) const {
    return offset % stripe == 0 ? offset + static_cast<uint64_t>(sockets - 1) * stripe : offset;
  }
  int socketOf(int lane, uint64_t offset) const {
    return static_cast<int>((offset / stripe + static_cast<uint64_t>(lane)) %
                            static_cast<uint64_t>(sockets));
  }
};

}  // namespace lanes
