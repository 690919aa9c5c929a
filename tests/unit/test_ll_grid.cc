// The LL kernel's grid per call (kernels/cuda/ll_allreduce.h): how many blocks
// a call of a given size, collective and rank count takes, within the cap the
// host derives from the GPU's multiprocessors and the ranks sharing it, and
// within the share of the GPU's polling blocks each rank on it gets.
#include <gtest/gtest.h>

#include "kernels/cuda/ll_allreduce.h"

namespace lanes::cuda {
namespace {

constexpr size_t kBlockBytes = kLlLinesPerBlock * kLlLinePayload;  // one block's lines

TEST(LlGrid, OneBlockUpToABlocksLines) {
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, 1, 2, true, 32, 1), 1);
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, kBlockBytes, 2, true, 32, 1), 1);
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, kBlockBytes + 1, 2, true, 32, 1), 2);
  EXPECT_EQ(llGridBlocks(LlCollective::AllGather, 4 * kBlockBytes, 2, true, 32, 1), 4);
}

TEST(LlGrid, MorePeersMoreBlocks) {
  // Each peer's lines are read: 7 peers read 7 times the lines of one.
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, kBlockBytes, 8, true, 32, 1), 7);
  // A broadcast reads the root's lines alone.
  EXPECT_EQ(llGridBlocks(LlCollective::Broadcast, kBlockBytes, 8, true, 32, 1), 1);
  // A reduce-scatter posts every rank's block: 4 blocks of one block's bytes.
  EXPECT_EQ(llGridBlocks(LlCollective::ReduceScatter, kBlockBytes, 4, true, 32, 1), 4);
  // A reduce's non-root only posts its lines.
  EXPECT_EQ(llGridBlocks(LlCollective::Reduce, kBlockBytes, 8, false, 32, 1), 1);
  EXPECT_EQ(llGridBlocks(LlCollective::Reduce, 3 * kBlockBytes, 8, false, 32, 1), 3);
}

TEST(LlGrid, CappedByTheResidencyShare) {
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, 64 * kBlockBytes, 2, true, 4, 1), 4);
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, 64 * kBlockBytes, 2, true, 1, 1), 1);
}

TEST(LlGrid, RanksOnOneGpuSplitItsPollingBlocks) {
  const size_t big = 64 * kBlockBytes;
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, big, 2, true, 1000, 1), kLlPollingBlocksPerGpu);
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, big, 2, true, 1000, 2),
            kLlPollingBlocksPerGpu / 2);
  EXPECT_EQ(llGridBlocks(LlCollective::AllGather, big, 3, true, 1000, 3),
            kLlPollingBlocksPerGpu / 3);
  // Eight readers on one GPU: one block each (and never none).
  EXPECT_EQ(llGridBlocks(LlCollective::Broadcast, big, 8, true, 1000, 8), 1);
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, big, 16, true, 1000, 16), 1);
  // A reduce's root is the only reader on its GPU: the whole share.
  EXPECT_EQ(llGridBlocks(LlCollective::Reduce, big, 8, true, 1000, 8), kLlPollingBlocksPerGpu);
}

TEST(LlGrid, AFewLinesTakeOneBlockWhateverTheRanks) {
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, 3 * kLlLinePayload, kLlMaxRanks, true, 32, 1), 1);
  EXPECT_EQ(llGridBlocks(LlCollective::ReduceScatter, 1, kLlMaxRanks, true, 32, 1), 1);
}

TEST(LlGrid, PostedLinesRoundEachBlockUp) {
  EXPECT_EQ(llPostedLines(LlCollective::AllReduce, 9, 4), 2u);
  EXPECT_EQ(llPostedLines(LlCollective::ReduceScatter, 9, 4), 8u);
  EXPECT_EQ(llPostedLines(LlCollective::Broadcast, 0, 4), 0u);
}

}  // namespace
}  // namespace lanes::cuda
