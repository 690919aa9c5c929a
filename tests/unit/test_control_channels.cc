// Communicators split from one another share one control mesh, each on a
// channel of its own: their messages stay apart, their rank numbers are
// their own, a crashed process is reported in each with the number it has
// there, and an abort or goodbye in one leaves the others alone. Ranks are
// threads of this process, each with its own mesh, as in test_bootstrap.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <latch>
#include <mutex>
#include <thread>

#include "bootstrap/bootstrap.h"
#include "bootstrap/mesh_channel.h"
#include "tests/unit/bootstrap_ranks.h"

namespace lanes {
namespace {

using testing::FailureLog;
using testing::infoFor;

// What lanesCommSplit does: members[0] takes a channel and tells the others
// over the parent; all join it. `self` is who this rank says it is there;
// `late` delays this rank's join once it knows the channel.
std::unique_ptr<Bootstrap> joinChild(Bootstrap& parent, const std::vector<int>& members,
                                     uint32_t tag, RankInfo self,
                                     std::chrono::milliseconds late = {}) {
  uint32_t channel = 0;
  if (parent.rank() == members[0]) {
    EXPECT_TRUE(parent.newChannel(&channel).isOk());
    for (size_t i = 1; i < members.size(); ++i)
      EXPECT_TRUE(parent.send(members[i], tag, &channel, sizeof(channel)).isOk());
  } else {
    std::vector<uint8_t> got;
    EXPECT_TRUE(parent.recv(members[0], tag, &got, Deadline::after(60)).isOk());
    EXPECT_EQ(got.size(), sizeof(channel));
    std::memcpy(&channel, got.data(), sizeof(channel));
  }
  EXPECT_NE(channel, 0u) << "the root channel was handed out";
  std::this_thread::sleep_for(late);
  std::unique_ptr<Bootstrap> child;
  Status st = parent.childJoin(channel, members)(self, Deadline::after(60), &child);
  EXPECT_TRUE(st.isOk()) << st.message();
  return child;
}

int indexOf(const std::vector<int>& v, int x) {
  auto it = std::find(v.begin(), v.end(), x);
  return it == v.end() ? -1 : static_cast<int>(it - v.begin());
}

TEST(ControlChannels, SplitsTalkApartOverOneMesh) {
  const int n = 5;
  const std::vector<int> evens = {4, 2, 0}, odds = {1, 3};
  testing::runOwningRanks(n, [&](std::unique_ptr<Bootstrap>& parent) {
    const int r = parent->rank();
    const std::vector<int>& members = r % 2 == 0 ? evens : odds;
    const int mine = indexOf(members, r);
    // Rank 0 joins late: the others' first frames on the channel reach its
    // process before it knows the channel, and must wait there.
    RankInfo self = infoFor(r);
    self.cudaDev = 10 + r;  // what may have changed since the parent's init
    std::unique_ptr<Bootstrap> child =
        joinChild(*parent, members, 1, self, std::chrono::milliseconds(r == 0 ? 300 : 0));
    ASSERT_TRUE(child);
    EXPECT_EQ(child->rank(), mine);
    ASSERT_EQ(child->nranks(), static_cast<int>(members.size()));
    for (int p = 0; p < child->nranks(); ++p) {
      EXPECT_EQ(child->ranks()[p].rank, p);
      EXPECT_EQ(child->ranks()[p].pid, 1000 + members[p]);
      EXPECT_EQ(child->ranks()[p].cudaDev, 10 + members[p]);
    }
    EXPECT_NE(child->id().commId, parent->id().commId);

    // The same tag on the parent and the child carries different messages.
    const int next = (mine + 1) % child->nranks();
    const int prev = (mine + child->nranks() - 1) % child->nranks();
    const int parentValue = 100 + r, childValue = 200 + mine;
    ASSERT_TRUE(parent->send((r + 1) % n, 7, &parentValue, sizeof(int)).isOk());
    ASSERT_TRUE(child->send(next, 7, &childValue, sizeof(int)).isOk());
    std::vector<uint8_t> got;
    ASSERT_TRUE(child->recv(prev, 7, &got, Deadline::after(60)).isOk());
    ASSERT_EQ(got.size(), sizeof(int));
    EXPECT_EQ(*reinterpret_cast<int*>(got.data()), 200 + prev);
    ASSERT_TRUE(parent->recv((r + n - 1) % n, 7, &got, Deadline::after(60)).isOk());
    EXPECT_EQ(*reinterpret_cast<int*>(got.data()), 100 + (r + n - 1) % n);

    // Collectives of the child and the parent interleave without mixing.
    std::vector<int> all(members.size(), -1);
    all[static_cast<size_t>(mine)] = r;
    ASSERT_TRUE(child->allGather(all.data(), sizeof(int), Deadline::after(60)).isOk());
    EXPECT_EQ(all, members);
    std::vector<int> everyone(n, -1);
    everyone[static_cast<size_t>(r)] = r * r;
    ASSERT_TRUE(parent->allGather(everyone.data(), sizeof(int), Deadline::after(60)).isOk());
    for (int p = 0; p < n; ++p) EXPECT_EQ(everyone[p], p * p);
    ASSERT_TRUE(child->barrier(Deadline::after(60)).isOk());
    ASSERT_TRUE(parent->barrier(Deadline::after(60)).isOk());
  });
}

TEST(ControlChannels, CrashIsReportedInEveryChannelWithItsRankThere) {
  const int n = 4, victim = 2;
  const std::vector<int> members = {3, 2, 1};  // rank 0 is no member
  std::vector<FailureLog> parentLogs(n), childLogs(n);
  testing::runOwningRanks(n, [&](std::unique_ptr<Bootstrap>& parent) {
    const int r = parent->rank();
    parent->setFailureHandler(parentLogs[r].handler());
    std::unique_ptr<Bootstrap> child;
    if (r != 0) {
      child = joinChild(*parent, members, 1, infoFor(r));
      ASSERT_TRUE(child);
      child->setFailureHandler(childLogs[r].handler());
    }
    ASSERT_TRUE(parent->barrier(Deadline::after(60)).isOk());
    if (r == victim) {
      dynamic_cast<MeshChannel&>(*parent).closeAbruptlyForTest();
      return;
    }
    EXPECT_TRUE(parentLogs[r].waitFor(1, 60)) << "rank " << r;
    if (child) {
      EXPECT_TRUE(childLogs[r].waitFor(1, 60)) << "rank " << r;
      std::vector<uint8_t> got;
      Status st = child->recv(1, 5, &got, Deadline::after(60));
      EXPECT_EQ(st.code(), lanesRemoteError);
      EXPECT_NE(st.message().find("rank 1 (host node0, pid 1002)"), std::string::npos)
          << st.message();
    }
  });
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    ASSERT_EQ(parentLogs[r].calls.size(), 1u) << "rank " << r;
    EXPECT_EQ(parentLogs[r].calls[0].first, victim);
    if (r == 0) {
      EXPECT_TRUE(childLogs[r].calls.empty());
      continue;
    }
    ASSERT_EQ(childLogs[r].calls.size(), 1u) << "rank " << r;
    EXPECT_EQ(childLogs[r].calls[0].first, 1) << "the victim's rank in the child";
    EXPECT_NE(childLogs[r].calls[0].second.find("closed its control connection"), std::string::npos)
        << childLogs[r].calls[0].second;
  }
}

TEST(ControlChannels, AbortInAChildLeavesTheParentWorking) {
  const int n = 3, aborter = 1;
  std::vector<FailureLog> parentLogs(n), childLogs(n);
  std::latch heard(n);
  testing::runOwningRanks(n, [&](std::unique_ptr<Bootstrap>& parent) {
    const int r = parent->rank();
    parent->setFailureHandler(parentLogs[r].handler());
    std::unique_ptr<Bootstrap> child = joinChild(*parent, {0, 1, 2}, 1, infoFor(r));
    ASSERT_TRUE(child);
    child->setFailureHandler(childLogs[r].handler());
    ASSERT_TRUE(child->barrier(Deadline::after(60)).isOk());
    if (r == aborter) {
      child->spreadFailure(aborter, "its stream failed");
    } else {
      EXPECT_TRUE(childLogs[r].waitFor(1, 60)) << "rank " << r;
    }
    heard.arrive_and_wait();
    // The parent's channel never heard of it and still works.
    ASSERT_TRUE(parent->barrier(Deadline::after(60)).isOk());
    std::vector<int> all(n, -1);
    all[static_cast<size_t>(r)] = r;
    ASSERT_TRUE(parent->allGather(all.data(), sizeof(int), Deadline::after(60)).isOk());
    EXPECT_EQ(all, (std::vector<int>{0, 1, 2}));
    child.reset();
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(parentLogs[r].count(), 0u) << "rank " << r << ": " << parentLogs[r].calls[0].second;
    if (r == aborter) continue;
    ASSERT_EQ(childLogs[r].calls.size(), 1u);
    EXPECT_EQ(childLogs[r].calls[0].first, aborter);
    EXPECT_NE(childLogs[r].calls[0].second.find("is aborting: its stream failed"),
              std::string::npos);
  }
}

TEST(ControlChannels, ChildOutlivesItsParentAndGoodbyesAreNoFailure) {
  const int n = 3, leaver = 2;
  std::vector<FailureLog> childLogs(n);
  std::vector<Status> recvAfter(n);
  std::latch left(n);
  testing::runOwningRanks(n, [&](std::unique_ptr<Bootstrap>& parent) {
    const int r = parent->rank();
    std::unique_ptr<Bootstrap> child = joinChild(*parent, {2, 1, 0}, 1, infoFor(r));
    ASSERT_TRUE(child);
    child->setFailureHandler(childLogs[r].handler());
    ASSERT_TRUE(parent->barrier(Deadline::after(60)).isOk());
    parent.reset();  // goodbye on the parent's channel; the connections stay for the child
    std::vector<int> all(n, -1);
    all[static_cast<size_t>(child->rank())] = r;
    ASSERT_TRUE(child->allGather(all.data(), sizeof(int), Deadline::after(60)).isOk());
    EXPECT_EQ(all, (std::vector<int>{2, 1, 0}));
    if (r == leaver) {
      child->shutdown();  // child rank 0
      left.arrive_and_wait();
      return;
    }
    std::vector<uint8_t> got;
    recvAfter[r] = child->recv(0, 3, &got, Deadline::after(60));
    left.arrive_and_wait();
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(childLogs[r].count(), 0u) << "rank " << r << ": " << childLogs[r].calls[0].second;
    if (r == leaver) continue;
    EXPECT_EQ(recvAfter[r].code(), lanesRemoteError);
    EXPECT_NE(recvAfter[r].message().find("rank 0 (host node0, pid 1002) already left"),
              std::string::npos)
        << recvAfter[r].message();
  }
}

}  // namespace
}  // namespace lanes
