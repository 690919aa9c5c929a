// The first-use probe's policy over a real cache file and lock (the
// measurement is a stand-in here; tests/gpu/test_first_use_probe.cc runs the
// real one): nothing without a cache, measure once and cache, read what
// another measured, wait for a taken lock and give up after its time, keep
// nothing of a failed measurement.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "topology/model.h"
#include "topology/probe.h"
#include "topology/probe_first_use.h"

namespace lanes::topo {
namespace {

// A machine the probes describe: its hash keys the cache entry.
Topology machine(const std::string& host) {
  Topology t;
  t.hostname = host;
  t.cores = 16;
  return t;
}

// What a measurement writes: complete host figures, `memGBs` to tell runs apart.
void fillHostFigures(double memGBs, Topology* t) {
  HostProbe& h = t->probes.host;
  h.hopLatencyUs = 1.5;
  h.memGBs = memGBs;
  h.exchangeGBs = 10;
  h.hopGBs.assign(HostProbe::kCurvePoints, 8.0);
  h.reduceGBs.assign(HostProbe::kCurvePoints, 6.0);
}

class ProbeFirstUse : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("lanes-first-use-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    cache_ = (dir_ / "sub" / "topo_probes.json").string();  // its folder made on demand
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  FirstUseProbe probe(double memGBs) {
    FirstUseProbe p;
    p.cachePath = cache_;
    p.lockSeconds = 5;
    p.measure = [this, memGBs](Topology* t) {
      ++measurements_;
      fillHostFigures(memGBs, t);
      return Status::ok();
    };
    return p;
  }

  std::filesystem::path dir_;
  std::string cache_;
  std::atomic<int> measurements_{0};
};

TEST_F(ProbeFirstUse, WithoutACacheNothingIsMeasured) {
  FirstUseProbe p = probe(30);
  p.cachePath.clear();
  Topology t = machine("a");
  FirstUseResult result = FirstUseResult::Measured;
  ASSERT_TRUE(probeAtFirstUse(p, &t, &result).isOk());
  EXPECT_EQ(result, FirstUseResult::NoCache);
  EXPECT_EQ(measurements_, 0);
  EXPECT_TRUE(t.probes.empty());
}

TEST_F(ProbeFirstUse, MeasuresOnceThenReadsTheCache) {
  Topology first = machine("a");
  FirstUseResult result = FirstUseResult::NoCache;
  ASSERT_TRUE(probeAtFirstUse(probe(30), &first, &result).isOk());
  EXPECT_EQ(result, FirstUseResult::Measured);
  EXPECT_EQ(measurements_, 1);
  EXPECT_EQ(first.probes.host.memGBs, 30);

  Topology later = machine("a");
  ASSERT_TRUE(probeAtFirstUse(probe(99), &later, &result).isOk());
  EXPECT_EQ(result, FirstUseResult::Cached);
  EXPECT_EQ(measurements_, 1);
  EXPECT_EQ(later.probes.host.memGBs, 30);  // the first measurement's, not a new one

  // Another machine sharing the home directory gets its own entry.
  Topology other = machine("b");
  ASSERT_TRUE(probeAtFirstUse(probe(40), &other, &result).isOk());
  EXPECT_EQ(result, FirstUseResult::Measured);
  Topology again = machine("a");
  ASSERT_TRUE(loadCachedProbes(cache_, &again));
  EXPECT_EQ(again.probes.host.memGBs, 30);
}

TEST_F(ProbeFirstUse, RacersMeasureOnceBetweenThem) {
  constexpr int kRacers = 4;
  FirstUseProbe slow = probe(30);
  slow.measure = [this](Topology* t) {
    ++measurements_;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    fillHostFigures(30, t);
    return Status::ok();
  };
  std::atomic<int> measured{0}, cached{0}, failed{0};
  std::vector<std::thread> racers;
  for (int i = 0; i < kRacers; ++i)
    racers.emplace_back([&] {
      Topology t = machine("a");
      FirstUseResult result = FirstUseResult::NoCache;
      if (!probeAtFirstUse(slow, &t, &result).isOk() || t.probes.host.memGBs != 30) ++failed;
      ++(result == FirstUseResult::Measured ? measured : cached);
    });
  for (std::thread& r : racers) r.join();
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(measured, 1);
  EXPECT_EQ(cached, kRacers - 1);
  EXPECT_EQ(measurements_, 1);
}

TEST_F(ProbeFirstUse, ATakenLockIsWaitedForAndThenGivenUp) {
  std::filesystem::create_directories(std::filesystem::path(cache_).parent_path());
  const std::string lockPath = firstUseLockPath(cache_, machine("a"));
  const int holder = ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(holder, 0);
  ASSERT_EQ(::flock(holder, LOCK_EX), 0);
  FirstUseProbe p = probe(30);
  p.lockSeconds = 0.3;
  Topology t = machine("a");
  FirstUseResult result = FirstUseResult::NoCache;
  const auto t0 = std::chrono::steady_clock::now();
  const Status s = probeAtFirstUse(p, &t, &result);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(s.code(), lanesTimeout);
  EXPECT_NE(s.message().find(lockPath), std::string::npos) << s.message();
  EXPECT_GE(waited, 0.3);
  EXPECT_EQ(measurements_, 0);
  EXPECT_TRUE(t.probes.empty());

  // Another machine's lock does not hold this one up.
  Topology other = machine("b");
  ASSERT_TRUE(probeAtFirstUse(p, &other, &result).isOk());
  EXPECT_EQ(result, FirstUseResult::Measured);

  // Released: the next one measures.
  ::close(holder);
  ASSERT_TRUE(probeAtFirstUse(p, &t, &result).isOk());
  EXPECT_EQ(result, FirstUseResult::Measured);
  EXPECT_EQ(measurements_, 2);
  Topology both = machine("b");
  ASSERT_TRUE(loadCachedProbes(cache_, &both));  // the two writers kept each other's entry
}

TEST_F(ProbeFirstUse, AFailedMeasurementKeepsNothing) {
  FirstUseProbe p = probe(30);
  p.measure = [](Topology* t) {
    t->probes.host.memGBs = 5;  // half done
    return systemError("no pinned memory");
  };
  Topology t = machine("a");
  FirstUseResult result = FirstUseResult::NoCache;
  const Status s = probeAtFirstUse(p, &t, &result);
  EXPECT_EQ(s.code(), lanesSystemError);
  EXPECT_EQ(s.message(), "no pinned memory");
  EXPECT_TRUE(t.probes.empty());
  EXPECT_EQ(t.probes.host.memGBs, 0);
  Topology again = machine("a");
  EXPECT_FALSE(loadCachedProbes(cache_, &again));
}

}  // namespace
}  // namespace lanes::topo
