// Helpers for bootstrap tests whose ranks are threads of this process, each
// with its own control mesh: a fresh root, who each rank says it is, running
// a body on every rank, and a log of failure-handler calls.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bootstrap/bootstrap.h"

namespace lanes::testing {

inline UniqueIdData newRoot() {
  lanesUniqueId raw;
  Status st = createUniqueIdAndRoot("127.0.0.1:0", nullptr, &raw);
  EXPECT_TRUE(st.isOk()) << st.message();
  UniqueIdData id;
  EXPECT_TRUE(decodeUniqueId(raw, &id).isOk());
  return id;
}

// Rank r is pid 1000 + r on host node<r % 2>.
inline RankInfo infoFor(int rank) {
  RankInfo info;
  info.rank = rank;
  info.pid = 1000 + rank;
  info.hostHash = 77;
  std::snprintf(info.hostname, sizeof(info.hostname), "node%d", rank % 2);
  return info;
}

// Runs `body` on `n` threads, each joined as one rank of a fresh
// communicator; the body owns the bootstrap (it may destroy it early).
inline void runOwningRanks(int n, const std::function<void(std::unique_ptr<Bootstrap>&)>& body) {
  UniqueIdData id = newRoot();
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      std::unique_ptr<Bootstrap> b;
      Status st = Bootstrap::create(id, n, infoFor(r), Deadline::after(60), &b);
      ASSERT_TRUE(st.isOk()) << "rank " << r << ": " << st.message();
      body(b);
    });
  for (auto& t : threads) t.join();
}

inline void runRanks(int n, const std::function<void(Bootstrap&)>& body) {
  runOwningRanks(n, [&](std::unique_ptr<Bootstrap>& b) { body(*b); });
}

// Collects failure-handler calls and lets a test wait for them.
struct FailureLog {
  std::mutex m;
  std::condition_variable cv;
  std::vector<std::pair<int, std::string>> calls;

  Bootstrap::FailureHandler handler() {
    return [this](int rank, const std::string& why) {
      std::lock_guard<std::mutex> lock(m);
      calls.emplace_back(rank, why);
      cv.notify_all();
    };
  }
  bool waitFor(size_t count, double seconds) {
    std::unique_lock<std::mutex> lock(m);
    return cv.wait_for(lock, std::chrono::duration<double>(seconds),
                       [&] { return calls.size() >= count; });
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(m);
    return calls.size();
  }
};

}  // namespace lanes::testing
