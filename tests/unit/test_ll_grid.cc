// The LL kernel's grid per call (kernels/cuda/ll_allreduce.h): how many blocks
// a call of a given size, collective and rank count takes, within the cap the
// host derives from the GPU's multiprocessors and the ranks sharing it.
#include <gtest/gtest.h>

#include "kernels/cuda/ll_allreduce.h"

namespace lanes::cuda {
namespace {

constexpr size_t kBlockBytes = kLlLinesPerBlock * kLlLinePayload;  // one block's lines

TEST(LlGrid, OneBlockUpToABlocksLines) {
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, 1, 2, true, 32), 1);
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, kBlockBytes, 2, true, 32), 1);
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, kBlockBytes + 1, 2, true, 32), 2);
  EXPECT_EQ(llGridBlocks(LlCollective::AllGather, 4 * kBlockBytes, 2, true, 32), 4);
}

TEST(LlGrid, MorePeersMoreBlocks) {
  // Each peer's lines are read: 7 peers read 7 times the lines of one.
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, kBlockBytes, 8, true, 32), 7);
  // A broadcast reads the root's lines alone.
  EXPECT_EQ(llGridBlocks(LlCollective::Broadcast, kBlockBytes, 8, true, 32), 1);
  // A reduce-scatter posts every rank's block: 4 blocks of one block's bytes.
  EXPECT_EQ(llGridBlocks(LlCollective::ReduceScatter, kBlockBytes, 4, true, 32), 4);
  // A reduce's non-root only posts its lines.
  EXPECT_EQ(llGridBlocks(LlCollective::Reduce, kBlockBytes, 8, false, 32), 1);
  EXPECT_EQ(llGridBlocks(LlCollective::Reduce, 3 * kBlockBytes, 8, false, 32), 3);
}

TEST(LlGrid, CappedByTheGpuShareAndTheKernelsLimit) {
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, 64 * kBlockBytes, 2, true, 16), 16);
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, 64 * kBlockBytes, 2, true, 1000), kLlMaxBlocks);
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, 64 * kBlockBytes, 2, true, 1), 1);
}

TEST(LlGrid, AFewLinesTakeOneBlockWhateverTheRanks) {
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, 3 * kLlLinePayload, kLlMaxRanks, true, 32), 1);
  EXPECT_EQ(llGridBlocks(LlCollective::ReduceScatter, 1, kLlMaxRanks, true, 32), 1);
}

TEST(LlGrid, PostedLinesRoundEachBlockUp) {
  EXPECT_EQ(llPostedLines(LlCollective::AllReduce, 9, 4), 2u);
  EXPECT_EQ(llPostedLines(LlCollective::ReduceScatter, 9, 4), 8u);
  EXPECT_EQ(llPostedLines(LlCollective::Broadcast, 0, 4), 0u);
}

}  // namespace
}  // namespace lanes::cuda
