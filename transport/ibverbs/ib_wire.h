// What the verbs transport puts on the wire besides payload: the immediate
// that ends each data write and the clear-to-send entries a receiver writes
// into its sender's FIFO. Each fits one 32- or 64-bit word, so a reader sees
// it whole or not at all.
//
// Each lane-direction of a connection is a ring of `slots` slots of at most
// `slotBytes` bytes in the receiver's memory. The sender writes one post
// into the next slot the receiver granted, as one RDMA write with an
// immediate saying (lane, slot, bytes). Once the reader consumed the slot,
// the receiver grants it again by writing a clear-to-send entry (lane, slot,
// sequence number) into the sender's FIFO, one entry per grant, in order; at
// the start every slot is granted. So a sender never writes where the
// reader has not finished, and never has more writes in flight than slots.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lanes::ib {

inline constexpr size_t kWireUnit = 16;  // immediates count bytes in these
inline constexpr int kMaxLanes = 256;
inline constexpr int kMaxSlots = 256;
inline constexpr size_t kMaxSlotBytes = size_t{512} << 10;  // < 65536 units

struct DataImmediate {
  int lane = 0;
  int slot = 0;
  size_t bytes = 0;  // a multiple of kWireUnit, 1 unit to kMaxSlotBytes
};

constexpr uint32_t packImmediate(const DataImmediate& d) {
  return static_cast<uint32_t>(d.lane) << 24 | static_cast<uint32_t>(d.slot) << 16 |
         static_cast<uint32_t>(d.bytes / kWireUnit);
}

constexpr DataImmediate unpackImmediate(uint32_t imm) {
  return DataImmediate{static_cast<int>(imm >> 24), static_cast<int>((imm >> 16) & 0xff),
                       (imm & 0xffff) * kWireUnit};
}

// A clear-to-send entry; sequence numbers start at 1, so a zeroed FIFO
// holds none, and an entry from the FIFO's previous lap never matches.
struct ClearToSend {
  uint32_t seq = 0;
  int lane = 0;
  int slot = 0;
};

constexpr uint64_t packClearToSend(const ClearToSend& c) {
  return static_cast<uint64_t>(c.seq) << 32 | static_cast<uint64_t>(c.lane) << 16 |
         static_cast<uint64_t>(c.slot);
}

constexpr ClearToSend unpackClearToSend(uint64_t word) {
  return ClearToSend{static_cast<uint32_t>(word >> 32), static_cast<int>((word >> 16) & 0xffff),
                     static_cast<int>(word & 0xffff)};
}

}  // namespace lanes::ib
