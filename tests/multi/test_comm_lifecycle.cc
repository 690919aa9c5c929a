// Communicator creation beyond init-by-rank: lanesCommSplit (colors, keys,
// NOCOLOR) and lanesCommInitAll (all ranks as threads of one process).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <thread>
#include <vector>

#include "tests/multi/harness.h"

namespace lanes::test {
namespace {

lanesConfig_t testConfig() {
  lanesConfig_t config = LANES_CONFIG_INITIALIZER;
  config.timeoutSeconds = rankTimeoutSeconds();
  return config;
}

// Checks that `comm` holds exactly `members` (old ranks, in new-rank order)
// and that data moves along that order.
void checkMembers(lanesComm_t comm, int oldRank, const std::vector<int>& members) {
  const int size = static_cast<int>(members.size());
  const int expectedRank =
      static_cast<int>(std::find(members.begin(), members.end(), oldRank) - members.begin());
  int count = -1, userRank = -1;
  RANK_CHECK_LANES(lanesCommCount(comm, &count), comm);
  RANK_CHECK_LANES(lanesCommUserRank(comm, &userRank), comm);
  RANK_CHECK(count == size, "new communicator has %d ranks, expected %d", count, size);
  RANK_CHECK(userRank == expectedRank, "old rank %d got new rank %d, expected %d", oldRank,
             userRank, expectedRank);

  std::vector<int32_t> gathered(size, -1);
  int32_t mine = oldRank;
  RANK_CHECK_LANES(lanesAllGather(&mine, gathered.data(), 1, lanesInt32, comm, nullptr), comm);
  for (int i = 0; i < size; ++i)
    RANK_CHECK(gathered[i] == members[i], "new rank %d holds old rank %d, expected %d", i,
               gathered[i], members[i]);

  int64_t value = oldRank + 1, sum = -1;
  RANK_CHECK_LANES(lanesAllReduce(&value, &sum, 1, lanesInt64, lanesSum, comm, nullptr), comm);
  int64_t expected = 0;
  for (int m : members) expected += m + 1;
  RANK_CHECK(sum == expected, "all-reduce on the split communicator gave %lld, expected %lld",
             static_cast<long long>(sum), static_cast<long long>(expected));
}

// 6 ranks: even/odd colors with reversed keys; the last rank opts out.
TEST(CommSplit, EvenOddReverseKeyAndNoColor) {
  runForked(6, [](int rank, int n, const lanesUniqueId& id) {
    CommGuard comm(initComm(rank, n, id));
    const bool optOut = rank == n - 1;
    const int color = optOut ? LANES_SPLIT_NOCOLOR : rank % 2;
    lanesConfig_t config = testConfig();
    lanesComm_t raw = nullptr;
    RANK_CHECK_LANES(lanesCommSplit(comm.get(), color, n - rank, &raw, &config), comm.get());
    CommGuard sub(raw);
    if (optOut) {
      RANK_CHECK(raw == nullptr, "NOCOLOR rank got a communicator");
    } else {
      RANK_CHECK(raw != nullptr, "split returned no communicator for color %d", color);
      std::vector<int> members;  // higher old rank = lower key = first
      for (int r = n - 2; r >= 0; --r)
        if (r % 2 == color) members.push_back(r);
      checkMembers(raw, rank, members);
    }
    // The parent stays usable after the split.
    int32_t one = 1, total = 0;
    RANK_CHECK_LANES(lanesAllReduce(&one, &total, 1, lanesInt32, lanesSum, comm.get(), nullptr),
                     comm.get());
    RANK_CHECK(total == n, "parent all-reduce after split gave %d, expected %d", total, n);
  });
}

// Equal keys keep the parent's order; one color gives a copy of the parent.
TEST(CommSplit, EqualKeysKeepParentOrder) {
  runThreads(3, [](int rank, int n, const lanesUniqueId& id) {
    CommGuard comm(initComm(rank, n, id));
    lanesConfig_t config = testConfig();
    lanesComm_t raw = nullptr;
    RANK_CHECK_LANES(lanesCommSplit(comm.get(), 7, 0, &raw, &config), comm.get());
    CommGuard sub(raw);
    RANK_CHECK(raw != nullptr, "split returned no communicator");
    std::vector<int> members(n);
    std::iota(members.begin(), members.end(), 0);
    checkMembers(raw, rank, members);
  });
}

constexpr int kInitAllRanks = 4;

class InitAllComms {
 public:
  InitAllComms() { result = lanesCommInitAll(comms, kInitAllRanks, nullptr); }
  ~InitAllComms() {
    if (result != lanesSuccess) return;
    for (lanesComm_t c : comms) lanesCommDestroy(c);
  }
  InitAllComms(const InitAllComms&) = delete;
  InitAllComms& operator=(const InitAllComms&) = delete;
  lanesComm_t comms[kInitAllRanks] = {};
  lanesResult_t result;
};

// NCCL's single-thread pattern: one thread drives every communicator inside
// a group; then each communicator is used from its own thread.
TEST(CommInitAll, FourThreadRanks) {
  Watchdog watchdog(90, "CommInitAll.FourThreadRanks");
  InitAllComms all;
  ASSERT_EQ(all.result, lanesSuccess) << lanesGetLastError(nullptr);
  for (int i = 0; i < kInitAllRanks; ++i) {
    int count = -1, rank = -1;
    ASSERT_EQ(lanesCommCount(all.comms[i], &count), lanesSuccess);
    ASSERT_EQ(lanesCommUserRank(all.comms[i], &rank), lanesSuccess);
    EXPECT_EQ(count, kInitAllRanks);
    EXPECT_EQ(rank, i);
  }

  constexpr size_t kCount = 10007;
  std::vector<std::vector<float>> send(kInitAllRanks), recv(kInitAllRanks);
  for (int i = 0; i < kInitAllRanks; ++i) {
    send[i].resize(kCount);
    recv[i].assign(kCount, -1.0f);
    for (size_t j = 0; j < kCount; ++j) send[i][j] = static_cast<float>((j % 100) * (i + 1));
  }
  ASSERT_EQ(lanesGroupStart(), lanesSuccess);
  for (int i = 0; i < kInitAllRanks; ++i)
    ASSERT_EQ(lanesAllReduce(send[i].data(), recv[i].data(), kCount, lanesFloat32, lanesSum,
                             all.comms[i], nullptr),
              lanesSuccess)
        << lanesGetLastError(all.comms[i]);
  ASSERT_EQ(lanesGroupEnd(), lanesSuccess) << lanesGetLastError(nullptr);
  for (int i = 0; i < kInitAllRanks; ++i)
    for (size_t j = 0; j < kCount; ++j)
      ASSERT_EQ(recv[i][j], static_cast<float>((j % 100) * 10)) << "rank " << i << " elem " << j;

  // One thread per communicator.
  std::vector<std::vector<int64_t>> gathered(kInitAllRanks,
                                             std::vector<int64_t>(kInitAllRanks * 3, -1));
  std::vector<lanesResult_t> results(kInitAllRanks, lanesInternalError);
  std::vector<std::thread> threads;
  for (int i = 0; i < kInitAllRanks; ++i) {
    threads.emplace_back([&, i] {
      int64_t mine[3] = {i, 100 + i, 1000 + i};
      results[i] = lanesAllGather(mine, gathered[i].data(), 3, lanesInt64, all.comms[i], nullptr);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kInitAllRanks; ++i) {
    ASSERT_EQ(results[i], lanesSuccess) << "rank " << i << ": " << lanesGetLastError(all.comms[i]);
    for (int r = 0; r < kInitAllRanks; ++r) {
      EXPECT_EQ(gathered[i][3 * r], r);
      EXPECT_EQ(gathered[i][3 * r + 1], 100 + r);
      EXPECT_EQ(gathered[i][3 * r + 2], 1000 + r);
    }
  }
}

}  // namespace
}  // namespace lanes::test
