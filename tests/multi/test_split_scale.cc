// Splits share their parent's control connections and monitor thread: 100
// communicators split from one parent of 8 forked ranks (colour by parity
// and all-in, alternately, and one split of a split) each run an all-reduce
// while all are alive; they may add no thread, and descriptors only for the
// shared-memory rings their plans use. Destroying them gives every
// descriptor back.
#include <gtest/gtest.h>

#include <deque>
#include <filesystem>
#include <vector>

#include "tests/multi/harness.h"

namespace lanes::test {
namespace {

int countEntries(const char* dir) {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

// Descriptors that are sockets (control connections and listeners).
int countSockets() {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(e.path(), ec);
    if (!ec && target.string().rfind("socket:", 0) == 0) ++n;
  }
  return n;
}

int32_t allReduceOne(lanesComm_t comm, int32_t value) {
  int32_t in = value, out = -1;
  RANK_CHECK_LANES(lanesAllReduce(&in, &out, 1, lanesInt32, lanesSum, comm, nullptr), comm);
  return out;
}

TEST(Splits, HundredFromOneParentShareItsConnectionsAndThread) {
  constexpr int kRanks = 8;
  constexpr int kSplits = 100;
  runForked(kRanks, [&](int rank, int nranks, const lanesUniqueId& id) {
    CommGuard parent(initComm(rank, nranks, id));
    RANK_CHECK(allReduceOne(parent.get(), 1) == nranks, "parent all-reduce");
    const int fdsBefore = countEntries("/proc/self/fd");
    const int socketsBefore = countSockets();
    const int threadsBefore = countEntries("/proc/self/task");

    std::deque<CommGuard> children;  // CommGuard does not move
    for (int i = 0; i < kSplits; ++i) {
      const bool byParity = i % 2 == 1;
      lanesComm_t child = nullptr;
      RANK_CHECK_LANES(lanesCommSplit(parent.get(), byParity ? rank % 2 : 0, rank, &child, nullptr),
                       parent.get());
      int size = 0;
      RANK_CHECK_LANES(lanesCommCount(child, &size), child);
      RANK_CHECK(size == (byParity ? nranks / 2 : nranks), "split %d has %d ranks", i, size);
      children.emplace_back(child);
    }
    // A split of a split rides the same connections.
    lanesComm_t grandchild = nullptr;
    RANK_CHECK_LANES(lanesCommSplit(children[1].get(), 0, nranks - rank, &grandchild, nullptr),
                     children[1].get());
    children.emplace_back(grandchild);
    int newRank = -1;
    RANK_CHECK_LANES(lanesCommUserRank(grandchild, &newRank), grandchild);
    RANK_CHECK(newRank == nranks / 2 - 1 - rank / 2, "grandchild rank %d", newRank);

    // All alive at once, each used: every rank sums its parent rank + 1.
    for (int i = 0; i < static_cast<int>(children.size()); ++i) {
      const bool byParity = i % 2 == 1 && i < kSplits;
      const bool grand = i == kSplits;
      int32_t want = 0;
      for (int r = 0; r < nranks; ++r)
        if (!(byParity || grand) || r % 2 == rank % 2) want += r + 1;
      const int32_t got = allReduceOne(children[static_cast<size_t>(i)].get(), rank + 1);
      RANK_CHECK(got == want, "communicator %d summed %d, want %d", i, got, want);
    }
    const int threadsAdded = countEntries("/proc/self/task") - threadsBefore;
    const int fdsAdded = countEntries("/proc/self/fd") - fdsBefore;
    RANK_CHECK(threadsAdded == 0, "%zu communicators started %d threads", children.size(),
               threadsAdded);
    // Only the senders of shared-memory rings keep a descriptor, one per
    // ring they made (its lock): an all-reduce of one element among 8 ranks
    // sends to at most log2(8) = 3 peers. The control connections are the
    // parent's mesh's (a child's rounds may open a few the parent's did not
    // need), and the arena's descriptor goes once every rank mapped it.
    RANK_CHECK(fdsAdded <= 3 * static_cast<int>(children.size()),
               "%zu communicators opened %d descriptors", children.size(), fdsAdded);

    children.clear();
    RANK_CHECK(allReduceOne(parent.get(), 2) == 2 * nranks, "parent after its children");
    // What stays are control connections the children opened: the mesh
    // keeps them for the parent, at most one per peer (two where both
    // ranks of a pair connected at once) besides the listener.
    const int socketsLeft = countSockets() - socketsBefore;
    const int fdsLeft = countEntries("/proc/self/fd") - fdsBefore - socketsLeft;
    RANK_CHECK(fdsLeft <= 0, "%d descriptors left after destroying the splits", fdsLeft);
    RANK_CHECK(countSockets() <= 2 * (nranks - 1) + 1, "%d sockets after destroying the splits",
               countSockets());
  });
}

}  // namespace
}  // namespace lanes::test
