// The LL kernel's grid per call (kernels/cuda/ll_allreduce.h): how many blocks
// a call of a given size, collective and rank count takes, within the cap the
// host derives from the GPU's multiprocessors and the ranks sharing it, and
// within each rank's share of the host's polling blocks.
#include <gtest/gtest.h>

#include "kernels/cuda/ll_allreduce.h"

namespace lanes::cuda {
namespace {

constexpr size_t kBlockBytes = kLlLinesPerBlock * kLlLinePayload;  // one block's lines

TEST(LlGrid, OneBlockUpToABlocksLines) {
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, 1, 2, true, 32), 1);
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, kBlockBytes, 2, true, 32), 1);
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, kBlockBytes + 1, 2, true, 32), 2);
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, 3 * kBlockBytes, 2, true, 32), 3);
}

TEST(LlGrid, MorePeersMoreBlocksWithinTheReadersShare) {
  // An all-reduce's rank reads each peer's lines: 3 peers, 3 times the lines of one.
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, kBlockBytes, 4, true, 32), 2);  // share: 2
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, kBlockBytes / 2, 3, true, 32), 1);
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, kBlockBytes / 2 + 1, 3, true, 32), 2);
  // A reduce's non-root only posts its lines.
  EXPECT_EQ(llGridBlocks(LlCollective::Reduce, kBlockBytes, 8, false, 32), 1);
  EXPECT_EQ(llGridBlocks(LlCollective::Reduce, 3 * kBlockBytes, 8, false, 32), 3);
  // A reduce-scatter posts every rank's block: 2 ranks, 2 blocks of one block's bytes.
  EXPECT_EQ(llGridBlocks(LlCollective::ReduceScatter, kBlockBytes, 2, true, 32), 2);
}

TEST(LlGrid, ReadersThatReduceNothingOrReadAloneTakeMoreBlocks) {
  // An all-gather's block reads half an all-reduce's lines.
  EXPECT_EQ(llGridBlocks(LlCollective::AllGather, kBlockBytes / 2, 2, true, 32), 1);
  EXPECT_EQ(llGridBlocks(LlCollective::AllGather, kBlockBytes, 2, true, 32), 2);
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, kBlockBytes, 2, true, 32), 1);
  // A reduce's root with fewer than 4 peers: a block per quarter of a block's
  // lines; with more, each peer's lines count.
  EXPECT_EQ(llGridBlocks(LlCollective::Reduce, kBlockBytes / 4, 2, true, 32), 1);
  EXPECT_EQ(llGridBlocks(LlCollective::Reduce, kBlockBytes / 4 + 1, 2, true, 32), 2);
  EXPECT_EQ(llGridBlocks(LlCollective::Reduce, kBlockBytes, 2, true, 32), 4);
  EXPECT_EQ(llGridBlocks(LlCollective::Reduce, kBlockBytes, 4, true, 32), 4);
  EXPECT_EQ(llGridBlocks(LlCollective::Reduce, kBlockBytes, 8, true, 32), 7);
  // One rank reads nothing: its lines alone count.
  EXPECT_EQ(llGridBlocks(LlCollective::Reduce, kBlockBytes, 1, true, 32), 1);
  EXPECT_EQ(llGridBlocks(LlCollective::AllGather, kBlockBytes, 1, true, 32), 1);
}

TEST(LlGrid, CappedByTheResidencyShare) {
  EXPECT_EQ(llGridBlocks(LlCollective::Reduce, 64 * kBlockBytes, 2, true, 3), 3);
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, 64 * kBlockBytes, 2, true, 1), 1);
}

TEST(LlGrid, ReadingRanksSplitTheHostsPollingBlocks) {
  const size_t big = 64 * kBlockBytes;
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, big, 2, true, 1000), kLlPollingBlocksPerHost / 2);
  EXPECT_EQ(llGridBlocks(LlCollective::AllGather, big, 3, true, 1000), kLlPollingBlocksPerHost / 3);
  // Every rank reads: 8 ranks take one block each, and more never none.
  EXPECT_EQ(llGridBlocks(LlCollective::Broadcast, big, 8, true, 1000), 1);
  EXPECT_EQ(llGridBlocks(LlCollective::ReduceScatter, kBlockBytes, 8, true, 1000), 1);
  EXPECT_EQ(llGridBlocks(LlCollective::AllReduce, big, 16, true, 1000), 1);
  // A reduce's root is the only reader: the whole share.
  EXPECT_EQ(llGridBlocks(LlCollective::Reduce, big, 8, true, 1000), kLlPollingBlocksPerHost);
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
