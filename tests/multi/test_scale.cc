// Many ranks on one host: shared memory follows the pairs a plan talks over,
// not every pair. 64 and 128 forked ranks run short all-reduces, an
// all-gather and a ring of sends; each rank then reads from its own mappings
// how many bytes of ring segments it made, and the host's sum must stay near
// LANES_SHM_BUDGET (eagerly connected, 64 ranks took 8 GiB). An all-to-all,
// which talks to every peer, is then run too: it must still fit, through
// smaller rings.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/scale/ring_mappings.h"
#include "tests/multi/harness.h"
#include "transport/shm/ring_budget.h"

namespace lanes::test {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// One value per rank, in memory the forked ranks share with this process.
class SharedSlots {
 public:
  explicit SharedSlots(int n) : n_(static_cast<size_t>(n)) {
    void* p = ::mmap(nullptr, bytes(), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    slots_ = p == MAP_FAILED ? nullptr : static_cast<std::atomic<uint64_t>*>(p);
  }
  ~SharedSlots() {
    if (slots_ != nullptr) ::munmap(slots_, bytes());
  }
  bool ok() const { return slots_ != nullptr; }
  std::atomic<uint64_t>& operator[](int r) { return slots_[r]; }
  uint64_t sum() const {
    uint64_t s = 0;
    for (size_t r = 0; r < n_; ++r) s += slots_[r].load();
    return s;
  }

 private:
  size_t bytes() const { return n_ * sizeof(uint64_t); }
  size_t n_;
  std::atomic<uint64_t>* slots_ = nullptr;
};

class ManyLocalRanks : public ::testing::TestWithParam<int> {};

TEST_P(ManyLocalRanks, SharedMemoryFollowsThePlanNotThePairs) {
  const int n = GetParam();
  SharedSlots afterRings(n), afterAllToAll(n);
  ASSERT_TRUE(afterRings.ok() && afterAllToAll.ok());
  RunOptions options;
  options.watchdogSeconds = 280;
  runForked(
      n,
      [&](int rank, int nranks, const lanesUniqueId& id) {
        CommGuard comm(initComm(rank, nranks, id));
        for (size_t count : {size_t{1}, size_t{1000}, size_t{300000}}) {
          std::vector<int32_t> in(count, rank + 1), out(count, -1);
          RANK_CHECK_LANES(lanesAllReduce(in.data(), out.data(), count, lanesInt32, lanesSum,
                                          comm.get(), nullptr),
                           comm.get());
          const int32_t want = nranks * (nranks + 1) / 2;
          RANK_CHECK(out.front() == want && out.back() == want, "all-reduce of %zu: %d, want %d",
                     count, out.back(), want);
        }
        std::vector<int32_t> mine(64, rank), all(64 * static_cast<size_t>(nranks), -1);
        RANK_CHECK_LANES(
            lanesAllGather(mine.data(), all.data(), 64, lanesInt32, comm.get(), nullptr),
            comm.get());
        for (int r = 0; r < nranks; ++r)
          RANK_CHECK(all[static_cast<size_t>(r) * 64 + 63] == r, "all-gather block %d", r);
        // A ring of sends: each rank to the next.
        std::vector<int32_t> got(1000, -1);
        RANK_CHECK_LANES(lanesGroupStart(), comm.get());
        RANK_CHECK_LANES(
            lanesSend(mine.data(), 64, lanesInt32, (rank + 1) % nranks, comm.get(), nullptr),
            comm.get());
        RANK_CHECK_LANES(lanesRecv(got.data(), 64, lanesInt32, (rank + nranks - 1) % nranks,
                                   comm.get(), nullptr),
                         comm.get());
        RANK_CHECK_LANES(lanesGroupEnd(), comm.get());
        RANK_CHECK(got[0] == (rank + nranks - 1) % nranks, "received %d", got[0]);
        afterRings[rank] = lanes::bench::ringBytesMadeBy(rank);

        std::vector<int32_t> send(static_cast<size_t>(nranks) * 16, rank),
            recv(static_cast<size_t>(nranks) * 16, -1);
        RANK_CHECK_LANES(
            lanesAlltoAll(send.data(), recv.data(), 16, lanesInt32, comm.get(), nullptr),
            comm.get());
        for (int r = 0; r < nranks; ++r)
          RANK_CHECK(recv[static_cast<size_t>(r) * 16] == r, "all-to-all block %d", r);
        afterAllToAll[rank] = lanes::bench::ringBytesMadeBy(rank);
      },
      options);
  const uint64_t rings = afterRings.sum();
  const uint64_t everyPair = afterAllToAll.sum();
  std::printf(
      "%d ranks: ring segments %.1f MiB after all-reduce/all-gather/sends, %.1f MiB "
      "after all-to-all (all pairs eagerly at 1 MiB x 2 lanes: %llu MiB)\n",
      n, double(rings) / kMiB, double(everyPair) / kMiB,
      static_cast<unsigned long long>(uint64_t(n) * (n - 1) * 2));
  // The default LANES_SHM_BUDGET is 512 MiB; past it only rings of the
  // smallest size, one segment per pair and direction at most.
  const uint64_t eager = uint64_t(n) * (n - 1) * segmentBytes(kMiB, 2);
  const uint64_t smallest = uint64_t(n) * (n - 1) * segmentBytes(RingBudget::kMinRingBytes, 2);
  EXPECT_GT(rings, 0u) << "no rank made a shared-memory ring";
  EXPECT_LE(rings, 512 * kMiB + smallest);
  EXPECT_LE(everyPair, 512 * kMiB + smallest);
  EXPECT_LT(everyPair * 10, eager) << "not even a tenth of every pair's full rings saved";
}

INSTANTIATE_TEST_SUITE_P(Scale, ManyLocalRanks, ::testing::Values(64, 128));

}  // namespace
}  // namespace lanes::test
