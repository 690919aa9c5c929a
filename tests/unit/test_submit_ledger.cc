// SubmitLedger (src/exec/submit_ledger.h): the host-side order that keeps
// thread ranks' counter waits behind the writes they wait for. Real threads:
// a wait returns once the value is posted, compares modulo 2^32 as the stream
// waits do, ends at its deadline or when poisoned, and ranks of one
// communicator share one ledger while other communicators get their own.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "exec/submit_ledger.h"

namespace lanes {
namespace {

using Wait = SubmitLedger::Wait;
using std::chrono::milliseconds;

TEST(SubmitLedger, WaitReturnsOncePostedByAnotherThread) {
  SubmitLedger ledger(8);
  std::atomic<bool> done{false};
  Wait result = Wait::TimedOut;
  std::thread waiter([&] {
    result = ledger.await(3, 2, Deadline::after(30));
    done = true;
  });
  ledger.post(3, 1);  // not enough yet
  std::this_thread::sleep_for(milliseconds(150));
  EXPECT_FALSE(done.load()) << "returned before value 2 was posted";
  ledger.post(5, 9);  // another line does not count
  std::this_thread::sleep_for(milliseconds(150));
  EXPECT_FALSE(done.load());
  ledger.post(3, 2);
  waiter.join();
  EXPECT_EQ(result, Wait::Posted);
  EXPECT_EQ(ledger.posted(3), 2u);
}

TEST(SubmitLedger, AlreadyPostedValuesReturnAtOnce) {
  SubmitLedger ledger(2);
  EXPECT_EQ(ledger.await(0, 0, Deadline::after(0)), Wait::Posted);  // counters start at 0
  ledger.post(1, 7);
  EXPECT_EQ(ledger.await(1, 5, Deadline::after(0)), Wait::Posted);
  EXPECT_EQ(ledger.await(1, 7, Deadline::after(0)), Wait::Posted);
}

TEST(SubmitLedger, ComparesAcrossTheWrapAsTheStreamWaitsDo) {
  SubmitLedger ledger(1);
  ledger.post(0, 0xFFFFFFF0u);
  EXPECT_EQ(ledger.await(0, 0xFFFFFFEFu, Deadline::after(0)), Wait::Posted);
  EXPECT_EQ(ledger.await(0, 3u, Deadline::after(0.05)), Wait::TimedOut);
  ledger.post(0, 5u);  // wrapped past 2^32
  EXPECT_EQ(ledger.await(0, 3u, Deadline::after(0)), Wait::Posted);
  EXPECT_EQ(ledger.await(0, 0xFFFFFFF8u, Deadline::after(0)), Wait::Posted);
}

TEST(SubmitLedger, TimesOutAtTheDeadline) {
  SubmitLedger ledger(1);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ledger.await(0, 1, Deadline::after(0.3)), Wait::TimedOut);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, milliseconds(290));
  EXPECT_LT(took, milliseconds(5000));
}

TEST(SubmitLedger, PoisonWakesASleepingWaiterAndEveryLaterOne) {
  SubmitLedger ledger(4);
  Wait result = Wait::Posted;
  std::thread waiter([&] { result = ledger.await(2, 1, Deadline::never()); });
  std::this_thread::sleep_for(milliseconds(200));  // past the spin: asleep
  ledger.poison();
  waiter.join();
  EXPECT_EQ(result, Wait::Poisoned);
  EXPECT_TRUE(ledger.poisoned());
  EXPECT_EQ(ledger.await(1, 1, Deadline::never()), Wait::Poisoned);
}

// Many posts and waits racing: no wake-up may be lost (a lost one would
// leave a waiter to its 20 s deadline).
TEST(SubmitLedger, NoWakeUpIsLostUnderRacingPosts) {
  SubmitLedger ledger(2);
  constexpr uint32_t kRounds = 2000;
  std::atomic<int> timeouts{0};
  std::thread a([&] {
    for (uint32_t v = 1; v <= kRounds; ++v) {
      ledger.post(0, v);
      if (ledger.await(1, v, Deadline::after(20)) != Wait::Posted) ++timeouts;
    }
  });
  std::thread b([&] {
    for (uint32_t v = 1; v <= kRounds; ++v) {
      if (ledger.await(0, v, Deadline::after(20)) != Wait::Posted) ++timeouts;
      if (v % 97 == 0) std::this_thread::sleep_for(milliseconds(1));  // let `a` fall asleep
      ledger.post(1, v);
    }
  });
  a.join();
  b.join();
  EXPECT_EQ(timeouts.load(), 0);
  EXPECT_EQ(ledger.posted(0), kRounds);
  EXPECT_EQ(ledger.posted(1), kRounds);
}

TEST(SubmitLedger, RanksOfOneCommunicatorShareOneLedger) {
  auto first = SubmitLedger::join(0x1234, 6);
  auto second = SubmitLedger::join(0x1234, 6);
  auto other = SubmitLedger::join(0x5678, 6);
  EXPECT_EQ(first.get(), second.get());
  EXPECT_NE(first.get(), other.get());
  first->post(4, 3);
  EXPECT_EQ(second->posted(4), 3u);
  EXPECT_EQ(other->posted(4), 0u);
  // Once every rank let go, the id is free again: a new ledger, fresh counters.
  first.reset();
  second.reset();
  auto again = SubmitLedger::join(0x1234, 6);
  EXPECT_EQ(again->posted(4), 0u);
}

}  // namespace
}  // namespace lanes
