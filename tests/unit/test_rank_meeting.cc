// RankMeeting (src/exec/rank_meeting.h): thread ranks meet once per call and
// the last to arrive acts for all. Real threads: the act runs once per round,
// by the last arrival, with every rank's offer; every rank returns its status;
// rounds repeat; a missing rank fails the meeting naming it (and it stays
// failed); poison wakes the waiting ranks.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "exec/rank_meeting.h"

namespace lanes {
namespace {

TEST(RankMeeting, TheLastArrivalActsOnceWithEveryOfferAndAllReturnItsStatus) {
  constexpr int n = 4;
  RankMeeting meeting(n);
  constexpr int kRounds = 300;
  std::atomic<int> acts{0};
  std::vector<int> failures(n, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      for (int round = 0; round < kRounds; ++round) {
        const int offer = r * 1000 + round;
        Status s = meeting.meet(r, &offer, Deadline::after(30), "test call",
                                [&](const std::vector<const void*>& offers) {
                                  ++acts;
                                  for (int p = 0; p < n; ++p)
                                    if (*static_cast<const int*>(offers[p]) != p * 1000 + round)
                                      return internalError("wrong offer");
                                  // Odd rounds fail: every rank must see it.
                                  return round % 2 ? invalidUsage("odd round") : Status::ok();
                                });
        if (static_cast<bool>(s) == (round % 2 == 1)) ++failures[r];
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(acts.load(), kRounds);
  for (int r = 0; r < n; ++r) EXPECT_EQ(failures[r], 0) << "rank " << r;
}

TEST(RankMeeting, AMissingRankTimesOutNamingItAndTheMeetingStaysFailed) {
  RankMeeting meeting(3);
  std::vector<Status> got(2);
  bool acted = false;
  auto act = [&](const std::vector<const void*>&) {
    acted = true;
    return Status::ok();
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      const int offer = r;
      got[r] = meeting.meet(r, &offer, Deadline::after(1.5), "all-reduce on rank x", act);
    });
  for (auto& t : threads) t.join();
  for (const Status& s : got) {
    EXPECT_EQ(s.code(), lanesTimeout);
    EXPECT_NE(s.message().find("rank(s) 2 (threads of this process)"), std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("all-reduce on rank x"), std::string::npos) << s.message();
  }
  // The late rank finds the meeting failed and must not act on the others'
  // (gone) offers.
  const int offer = 2;
  Status late = meeting.meet(2, &offer, Deadline::after(1), "late", act);
  EXPECT_EQ(late.code(), lanesTimeout);
  EXPECT_FALSE(acted);
}

TEST(RankMeeting, PoisonWakesTheWaitingRanks) {
  RankMeeting meeting(2, std::chrono::seconds(10));  // a missed wake-up would cost 10 s
  Status got;
  std::thread waiter([&] {
    const int offer = 0;
    got = meeting.meet(0, &offer, Deadline::never(), "call",
                       [](const std::vector<const void*>&) { return Status::ok(); });
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto start = std::chrono::steady_clock::now();
  meeting.poison(remoteError("rank 1 aborted"));
  waiter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(got.code(), lanesRemoteError);
  EXPECT_EQ(got.message(), "rank 1 aborted");
}

// Poison comes from failure hooks, which must never wait behind an act (its
// CUDA calls may be what the failure is about to release).
TEST(RankMeeting, PoisonDoesNotWaitForAnActInProgress) {
  RankMeeting meeting(2);
  std::atomic<bool> acting{false}, release{false};
  // Whichever rank arrives last acts, and its act holds the round.
  auto act = [&](const std::vector<const void*>&) {
    acting = true;
    while (!release.load()) std::this_thread::yield();
    return Status::ok();
  };
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      const int offer = r;
      (void)meeting.meet(r, &offer, Deadline::after(30), "call", act);
    });
  while (!acting.load()) std::this_thread::yield();
  const auto start = std::chrono::steady_clock::now();
  meeting.poison(remoteError("failed"));  // must not block on the act
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
  release = true;
  for (auto& t : ranks) t.join();
  const int offer = 0;
  EXPECT_EQ(meeting
                .meet(0, &offer, Deadline::after(1), "call",
                      [](const std::vector<const void*>&) { return Status::ok(); })
                .code(),
            lanesRemoteError);
}

// A waiting rank whose communicator is aborted leaves, and its offer with it:
// the next round still needs it, and nobody acts on the dead offer.
TEST(RankMeeting, AnAbortedRankLeavesAndTakesItsOfferBack) {
  RankMeeting meeting(2);
  std::atomic<bool> aborted{false};
  Status got;
  std::thread waiter([&] {
    const int offer = 0;
    got = meeting.meet(
        0, &offer, Deadline::never(), "all-reduce",
        [](const std::vector<const void*>&) { return Status::ok(); }, &aborted);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  aborted = true;
  waiter.join();
  EXPECT_EQ(got.code(), lanesInvalidUsage);
  EXPECT_NE(got.message().find("aborted"), std::string::npos) << got.message();
  bool acted = false;
  const int offer = 1;
  EXPECT_EQ(meeting
                .meet(1, &offer, Deadline::after(0.3), "all-reduce",
                      [&](const std::vector<const void*>&) {
                        acted = true;
                        return Status::ok();
                      })
                .code(),
            lanesTimeout);
  EXPECT_FALSE(acted);
}

TEST(RankMeeting, RanksOfOneCommunicatorShareOneMeeting) {
  auto a = RankMeeting::join(0xabc, 2);
  auto b = RankMeeting::join(0xabc, 2);
  auto c = RankMeeting::join(0xdef, 2);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_NE(a.get(), c.get());
}

}  // namespace
}  // namespace lanes
