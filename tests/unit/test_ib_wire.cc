// The verbs transport's wire words (transport/ibverbs/ib_wire.h): every
// field survives packing at its limits.
#include <gtest/gtest.h>

#include "transport/ibverbs/ib_wire.h"

namespace lanes::ib {
namespace {

TEST(IbWire, ImmediatesCarryLaneSlotAndBytesAtTheirLimits) {
  for (int lane : {0, 1, kMaxLanes - 1})
    for (int slot : {0, 7, kMaxSlots - 1})
      for (size_t bytes : {kWireUnit, size_t{4096}, kMaxSlotBytes - kWireUnit, kMaxSlotBytes}) {
        const DataImmediate d = unpackImmediate(packImmediate(DataImmediate{lane, slot, bytes}));
        EXPECT_EQ(d.lane, lane);
        EXPECT_EQ(d.slot, slot);
        EXPECT_EQ(d.bytes, bytes);
      }
}

TEST(IbWire, ClearToSendEntriesRoundTrip) {
  const ClearToSend c = unpackClearToSend(packClearToSend(ClearToSend{0xfffffffe, 255, 255}));
  EXPECT_EQ(c.seq, 0xfffffffeu);
  EXPECT_EQ(c.lane, 255);
  EXPECT_EQ(c.slot, 255);
  EXPECT_EQ(unpackClearToSend(0).seq, 0u);  // a zeroed FIFO holds no entry
}

}  // namespace
}  // namespace lanes::ib
