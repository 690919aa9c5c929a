// FakeBootstrap: a lanes::Bootstrap for N ranks that are threads of the test
// process. The ranks share one FakeBootstrapGroup (mutex + condvar); every
// wait is bounded by the caller's deadline. runRanks() starts one thread per
// rank and joins them.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "bootstrap/bootstrap.h"

namespace lanes::testing {

class FakeBootstrapGroup {
 public:
  // `sameHost`: every rank gets the same hostHash (shm-capable).
  explicit FakeBootstrapGroup(int nranks, bool sameHost = true) : nranks_(nranks) {
    static std::atomic<uint64_t> counter{1};
    id_.family = AF_INET;
    id_.commId =
        (uint64_t{0x1a2e5} << 32) ^ (static_cast<uint64_t>(::getpid()) << 8) ^ counter.fetch_add(1);
    for (int i = 0; i < 32; ++i) id_.secret[i] = static_cast<uint8_t>(0xa5 ^ (i * 37));
    for (int r = 0; r < nranks; ++r) {
      RankInfo info;
      info.rank = r;
      info.hostHash = sameHost ? 0x5a5a5a5aull : 0x1000ull + static_cast<uint64_t>(r);
      info.pid = ::getpid();
      std::snprintf(info.hostname, sizeof(info.hostname), "fakehost%d", sameHost ? 0 : r);
      ranks_.push_back(info);
    }
    calls_.assign(static_cast<size_t>(nranks), 0);
  }
  int nranks() const { return nranks_; }
  const std::vector<RankInfo>& ranks() const { return ranks_; }
  const UniqueIdData& id() const { return id_; }
  // A name unique to this group, safe for shm segment names.
  std::string commTag() const {
    char buf[48];
    std::snprintf(buf, sizeof(buf), "lanes-test-%016llx",
                  static_cast<unsigned long long>(id_.commId));
    return buf;
  }

  Status allGather(int rank, void* data, size_t bytes, Deadline deadline) {
    std::unique_lock lock(mu_);
    uint64_t round = calls_[static_cast<size_t>(rank)]++;
    Round& r = rounds_[round];
    if (r.slots.empty()) r.slots.resize(static_cast<size_t>(nranks_));
    auto* mine = static_cast<uint8_t*>(data) + static_cast<size_t>(rank) * bytes;
    r.slots[static_cast<size_t>(rank)].assign(mine, mine + bytes);
    ++r.arrived;
    cv_.notify_all();
    while (r.arrived < nranks_) {
      if (cv_.wait_until(lock, deadline.at()) == std::cv_status::timeout && r.arrived < nranks_)
        return timeoutError("fake bootstrap: allGather round " + std::to_string(round) +
                            " timed out on rank " + std::to_string(rank));
    }
    for (int i = 0; i < nranks_; ++i) {
      const auto& slot = r.slots[static_cast<size_t>(i)];
      if (slot.size() != bytes) return internalError("fake bootstrap: allGather size mismatch");
      std::memcpy(static_cast<uint8_t*>(data) + static_cast<size_t>(i) * bytes, slot.data(), bytes);
    }
    if (++r.departed == nranks_) rounds_.erase(round);
    return Status::ok();
  }
  Status send(int src, int dst, uint32_t tag, const void* data, size_t bytes) {
    std::lock_guard lock(mu_);
    auto* p = static_cast<const uint8_t*>(data);
    mail_[{src, dst, tag}].emplace_back(p, p + bytes);
    cv_.notify_all();
    return Status::ok();
  }
  Status recv(int src, int dst, uint32_t tag, std::vector<uint8_t>* data, Deadline deadline) {
    std::unique_lock lock(mu_);
    auto& box = mail_[{src, dst, tag}];
    while (box.empty()) {
      if (cv_.wait_until(lock, deadline.at()) == std::cv_status::timeout && box.empty())
        return timeoutError("fake bootstrap: recv timed out");
    }
    *data = std::move(box.front());
    box.pop_front();
    return Status::ok();
  }

 private:
  struct Round {
    std::vector<std::vector<uint8_t>> slots;
    int arrived = 0;
    int departed = 0;
  };
  int nranks_;
  UniqueIdData id_;
  std::vector<RankInfo> ranks_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint64_t> calls_;
  std::map<uint64_t, Round> rounds_;
  std::map<std::tuple<int, int, uint32_t>, std::deque<std::vector<uint8_t>>> mail_;
};

class FakeBootstrap final : public Bootstrap {
 public:
  FakeBootstrap(FakeBootstrapGroup* group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int nranks() const override { return group_->nranks(); }
  const std::vector<RankInfo>& ranks() const override { return group_->ranks(); }
  const UniqueIdData& id() const override { return idOverride_ ? *idOverride_ : group_->id(); }
  // Makes this rank present another id (a foreign communicator's secret).
  void overrideId(const UniqueIdData& id) { idOverride_ = id; }
  Status allGather(void* data, size_t bytes, Deadline deadline) override {
    return group_->allGather(rank_, data, bytes, deadline);
  }
  Status barrier(Deadline deadline) override {
    std::vector<uint8_t> none(static_cast<size_t>(nranks()));
    return allGather(none.data(), 1, deadline);
  }
  Status send(int peer, uint32_t tag, const void* data, size_t bytes) override {
    return group_->send(rank_, peer, tag, data, bytes);
  }
  Status recv(int peer, uint32_t tag, std::vector<uint8_t>* data, Deadline deadline) override {
    return group_->recv(peer, rank_, tag, data, deadline);
  }
  void setFailureHandler(FailureHandler) override {}
  void spreadFailure(int, const std::string&) override {}
  void reportProgress(uint64_t) override {}
  int64_t peerProgress(int) const override { return -1; }
  void shutdown() override {}

 private:
  FakeBootstrapGroup* group_;
  int rank_;
  std::optional<UniqueIdData> idOverride_;
};

// Runs fn(rank) on one thread per rank and joins them all.
inline void runRanks(int nranks, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

}  // namespace lanes::testing
