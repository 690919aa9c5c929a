// The group simulation's time model: monotone in size and rank count, slower
// over sockets than shared memory, free for empty calls.
#include <gtest/gtest.h>

#include "planner/cost_model.h"

namespace lanes {
namespace {

double predict(CollType coll, size_t bytes, int nranks, HopClass hop, bool p2p = false) {
  CostQuery q;
  q.coll = coll;
  q.bytes = bytes;
  q.nranks = nranks;
  q.hop = hop;
  q.pointToPoint = p2p;
  return predictSeconds(q);
}

TEST(CostModel, EmptyCallsCostNothing) {
  EXPECT_EQ(predict(CollType::AllReduce, 0, 8, HopClass::Socket), 0.0);
}

TEST(CostModel, GrowsWithSizeAndRanks) {
  for (CollType c :
       {CollType::AllReduce, CollType::Broadcast, CollType::Reduce, CollType::AllGather,
        CollType::ReduceScatter, CollType::AlltoAll, CollType::Gather, CollType::Scatter}) {
    SCOPED_TRACE(collTypeName(c));
    EXPECT_GT(predict(c, 1 << 20, 4, HopClass::SharedMemory),
              predict(c, 1 << 10, 4, HopClass::SharedMemory));
    EXPECT_GT(predict(c, 1 << 20, 8, HopClass::SharedMemory),
              predict(c, 1 << 20, 2, HopClass::SharedMemory));
    EXPECT_GT(predict(c, 1 << 20, 4, HopClass::Socket),
              predict(c, 1 << 20, 4, HopClass::SharedMemory));
  }
}

TEST(CostModel, RingAllReduceFollowsAlphaBeta) {
  // 2(n-1) steps of latency plus 2(n-1)/n of the bytes at the hop's bandwidth.
  const double t1 = predict(CollType::AllReduce, 1e6, 4, HopClass::DeviceStaged);
  const double t2 = predict(CollType::AllReduce, 2e6, 4, HopClass::DeviceStaged);
  const double perByte = (t2 - t1) / 1e6;
  EXPECT_NEAR(perByte * 1e6, 1.5 * 1e6 / 25e9, 1e-9);
  EXPECT_NEAR(t1 - perByte * 1e6, 6 * 15e-6, 1e-9);
}

TEST(CostModel, OneRankIsACopy) {
  EXPECT_LT(predict(CollType::AllReduce, 1 << 20, 1, HopClass::Socket),
            predict(CollType::AllReduce, 1 << 20, 2, HopClass::Socket));
  EXPECT_GT(predict(CollType::AllReduce, 8, 1, HopClass::Socket, true), 0.0);
}

}  // namespace
}  // namespace lanes
