// SubmitLedger (transport/channel/submit_ledger.h): the host-side order that keeps
// thread ranks' counter waits behind the writes they wait for. Real threads:
// a wait returns once the value is posted, compares modulo 2^32 as the stream
// waits do, ends at its deadline or when poisoned, and ranks of one
// communicator share one ledger while other communicators get their own.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>

#include "exec/per_communicator.h"
#include "transport/channel/submit_ledger.h"

namespace lanes {
namespace {

using Wait = SubmitLedger::Wait;
using std::chrono::milliseconds;

// Slices this long turn a lost wake-up into a 10 s wait, which the time
// checks below catch for certain.
constexpr std::chrono::seconds kLongSlice{10};

// The waiter is asleep by the time the value comes (past its spin), and must
// wake from the post, not at the end of its slice.
TEST(SubmitLedger, WaitReturnsOncePostedByAnotherThread) {
  SubmitLedger ledger(8, kLongSlice);
  std::atomic<bool> done{false};
  std::atomic<int64_t> returnedAtUs{0};
  Wait result = Wait::TimedOut;
  std::thread waiter([&] {
    result = ledger.await(3, 2, Deadline::after(30));
    returnedAtUs = std::chrono::duration_cast<std::chrono::microseconds>(
                       std::chrono::steady_clock::now().time_since_epoch())
                       .count();
    done = true;
  });
  ledger.post(3, 1);  // not enough yet
  std::this_thread::sleep_for(milliseconds(150));
  EXPECT_FALSE(done.load()) << "returned before value 2 was posted";
  ledger.post(5, 9);  // another line does not count
  std::this_thread::sleep_for(milliseconds(250));
  EXPECT_FALSE(done.load());
  const int64_t postedAtUs = std::chrono::duration_cast<std::chrono::microseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count();
  ledger.post(3, 2);
  waiter.join();
  EXPECT_EQ(result, Wait::Posted);
  EXPECT_EQ(ledger.posted(3), 2u);
  EXPECT_LT(returnedAtUs.load() - postedAtUs, 2000000)
      << "woke at the slice's end, not by the post";
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
  SubmitLedger ledger(4, kLongSlice);
  Wait result = Wait::Posted;
  std::thread waiter([&] { result = ledger.await(2, 1, Deadline::never()); });
  std::this_thread::sleep_for(milliseconds(250));  // past the spin: asleep
  const auto start = std::chrono::steady_clock::now();
  ledger.poison("rank 1 of 2: peer died");
  waiter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(result, Wait::Poisoned);
  EXPECT_TRUE(ledger.poisoned());
  EXPECT_EQ(ledger.why(), "rank 1 of 2: peer died");
  ledger.poison("a later failure");  // the first reason stays
  EXPECT_EQ(ledger.why(), "rank 1 of 2: peer died");
  EXPECT_EQ(ledger.await(1, 1, Deadline::never()), Wait::Poisoned);
}

// The waiting rank's own communicator is aborted: the wait ends (within a
// slice) although nothing was posted or poisoned.
TEST(SubmitLedger, AbortOfTheWaitingRankEndsItsWait) {
  SubmitLedger ledger(2);
  std::atomic<bool> aborted{false};
  Wait result = Wait::Posted;
  std::thread waiter([&] { result = ledger.await(0, 1, Deadline::never(), &aborted); });
  std::this_thread::sleep_for(milliseconds(150));
  aborted = true;
  waiter.join();
  EXPECT_EQ(result, Wait::Aborted);
  EXPECT_FALSE(ledger.poisoned());
}

// Many posts and waits racing, some waits asleep: every wait ends posted,
// and none at the end of a slice (a lost wake-up would cost 10 s).
TEST(SubmitLedger, NoWakeUpIsLostUnderRacingPosts) {
  SubmitLedger ledger(2, kLongSlice);
  const auto start = std::chrono::steady_clock::now();
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
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(8));
  EXPECT_EQ(ledger.posted(0), kRounds);
  EXPECT_EQ(ledger.posted(1), kRounds);
}

// The staged path finds its communicator's ledger so (staged_setup.cc).
std::shared_ptr<SubmitLedger> ledgerOf(uint64_t commId, size_t lines) {
  return sharedPerCommunicator<SubmitLedger>(commId, lines);
}

TEST(SubmitLedger, RanksOfOneCommunicatorShareOneLedger) {
  auto first = ledgerOf(0x1234, 6);
  auto second = ledgerOf(0x1234, 6);
  auto other = ledgerOf(0x5678, 6);
  EXPECT_EQ(first.get(), second.get());
  EXPECT_NE(first.get(), other.get());
  first->post(4, 3);
  EXPECT_EQ(second->posted(4), 3u);
  EXPECT_EQ(other->posted(4), 0u);
  // Once every rank let go, the id is free again: a new ledger, fresh counters.
  first.reset();
  second.reset();
  auto again = ledgerOf(0x1234, 6);
  EXPECT_EQ(again->posted(4), 0u);
}

}  // namespace
}  // namespace lanes
