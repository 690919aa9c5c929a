// NUMA placement: the mbind/get_mempolicy helper, the shm segment's
// place-before-reserve order, and which arena bytes go to which node. The
// test machines have one NUMA node, so the syscall tests use node 0 (or the
// first online node) and check the policy the kernel reports back.
#include <gtest/gtest.h>
#include <linux/mempolicy.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "transport/common/numa_policy.h"
#include "transport/hoststage/arena_placement.h"
#include "transport/shm/shm_segment.h"

namespace lanes {
namespace {

const size_t kPage = static_cast<size_t>(::sysconf(_SC_PAGESIZE));

// The policy the kernel holds for the page at `addr`: its mode and the
// lowest node of its mask (-1 when the mask is empty).
struct Policy {
  int mode = -1;
  int node = -1;
};
bool policyAt(const void* addr, Policy* out) {
  int mode = -1;
  std::vector<unsigned long> mask(16, 0);  // 1024 nodes
  if (::syscall(SYS_get_mempolicy, &mode, mask.data(), mask.size() * 64 + 1, addr, MPOL_F_ADDR) !=
      0)
    return false;
  out->mode = mode;
  out->node = -1;
  for (size_t i = 0; i < mask.size() * 64 && out->node < 0; ++i)
    if (mask[i / 64] & (1UL << (i % 64))) out->node = static_cast<int>(i);
  return true;
}

// An anonymous private mapping, unmapped at scope exit.
class Mapping {
 public:
  explicit Mapping(size_t bytes) : bytes_(bytes) {
    ptr_ = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  }
  ~Mapping() {
    if (ptr_ != MAP_FAILED) ::munmap(ptr_, bytes_);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  bool ok() const { return ptr_ != MAP_FAILED; }
  std::byte* data() const { return static_cast<std::byte*>(ptr_); }
  size_t size() const { return bytes_; }

 private:
  void* ptr_ = MAP_FAILED;
  size_t bytes_;
};

// The first online node, or skip (no NUMA support, or mbind refused here).
int usableNodeOrSkip(std::string* why) {
  std::vector<int> online = onlineNumaNodes();
  if (online.empty()) {
    *why = "no /sys/devices/system/node/online: the kernel has no NUMA support";
    return -1;
  }
  Mapping probe(kPage);
  if (!probe.ok()) {
    *why = "mmap failed";
    return -1;
  }
  Status s = applyPreferredNode(probe.data(), kPage, online.front());
  if (!s && s.message().find("Operation not permitted") != std::string::npos) {
    *why = "mbind is refused in this container: " + s.message();
    return -1;
  }
  return online.front();
}

TEST(NumaPolicy, ParsesSysfsNodeLists) {
  std::vector<int> nodes;
  ASSERT_TRUE(parseNodeList("0\n", &nodes));
  EXPECT_EQ(nodes, std::vector<int>({0}));
  ASSERT_TRUE(parseNodeList("0-1", &nodes));
  EXPECT_EQ(nodes, std::vector<int>({0, 1}));
  ASSERT_TRUE(parseNodeList("0,2-3,5", &nodes));
  EXPECT_EQ(nodes, std::vector<int>({0, 2, 3, 5}));
  EXPECT_FALSE(parseNodeList("", &nodes));
  EXPECT_FALSE(parseNodeList("x", &nodes));
  EXPECT_FALSE(parseNodeList("3-1", &nodes));
  EXPECT_FALSE(parseNodeList("1-2x", &nodes));
  EXPECT_FALSE(parseNodeList("-1", &nodes));
}

TEST(NumaPolicy, OnlineNodesExistInSysfs) {
  std::vector<int> online = onlineNumaNodes();
  if (online.empty()) GTEST_SKIP() << "no /sys/devices/system/node/online (no NUMA support)";
  for (int n : online) {
    struct stat st {};
    std::string dir = "/sys/devices/system/node/node" + std::to_string(n);
    EXPECT_EQ(::stat(dir.c_str(), &st), 0) << dir;
  }
}

TEST(NumaPolicy, PreferNodeOnAnonymousMappingPlacesTouchedPages) {
  std::string why;
  const int node = usableNodeOrSkip(&why);
  if (node < 0) GTEST_SKIP() << why;
  Mapping m(16 * kPage);
  ASSERT_TRUE(m.ok());
  Status s = applyPreferredNode(m.data(), m.size(), node);
  ASSERT_TRUE(s) << s.message();
  Policy p;
  ASSERT_TRUE(policyAt(m.data() + 5 * kPage, &p)) << errno;
  EXPECT_EQ(p.mode, MPOL_PREFERRED);
  EXPECT_EQ(p.node, node);
  std::memset(m.data(), 1, m.size());
  for (size_t off = 0; off < m.size(); off += kPage)
    EXPECT_EQ(nodeOfPage(m.data() + off), node) << "page at offset " << off;
  // The one-node shortcut of preferNode is OK too, and so is an empty range.
  EXPECT_TRUE(preferNode(m.data(), m.size(), node));
  EXPECT_TRUE(applyPreferredNode(m.data(), 0, node));
}

TEST(NumaPolicy, UnknownNodeIsANoOp) {
  Mapping m(4 * kPage);
  ASSERT_TRUE(m.ok());
  Status s = preferNode(m.data(), m.size(), -1);
  EXPECT_TRUE(s) << s.message();
  Policy p;
  if (!policyAt(m.data(), &p)) GTEST_SKIP() << "get_mempolicy refused here";
  EXPECT_EQ(p.mode, MPOL_DEFAULT);  // nothing was set
}

TEST(NumaPolicy, InvalidNodeIsAClearError) {
  if (onlineNumaNodes().empty()) GTEST_SKIP() << "no NUMA support: every node is unknown";
  Mapping m(4 * kPage);
  ASSERT_TRUE(m.ok());
  Status s = preferNode(m.data(), m.size(), 4000);
  EXPECT_EQ(s.code(), lanesInvalidArgument);
  EXPECT_NE(s.message().find("NUMA node 4000 is not online"), std::string::npos) << s.message();
  s = applyPreferredNode(m.data(), m.size(), 1 << 20);
  EXPECT_EQ(s.code(), lanesInvalidArgument);
  EXPECT_NE(s.message().find("not a valid node"), std::string::npos) << s.message();
  // Past the online check the kernel refuses it, and that is an error too.
  s = applyPreferredNode(m.data(), m.size(), 4000);
  EXPECT_FALSE(s);
  EXPECT_NE(s.message().find("mbind"), std::string::npos) << s.message();
  s = applyPreferredNode(m.data() + 1, kPage, 0);
  EXPECT_EQ(s.code(), lanesInvalidArgument);
}

TEST(NumaPolicy, NodeOfPageFailsCleanlyOnUnmappedAddress) {
  void* addr = ::mmap(nullptr, kPage, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(addr, MAP_FAILED);
  ASSERT_EQ(::munmap(addr, kPage), 0);
  EXPECT_EQ(nodeOfPage(addr), -1);
}

// The arena's order: map, set the policy, then reserve. The policy set on the
// creator's mapping is the file's (shared policy): a second mapping sees it,
// and the pages fallocate reserved sit on the node.
TEST(NumaPolicy, ShmPolicyIsSetBeforePagesExistAndIsShared) {
  std::string why;
  const int node = usableNodeOrSkip(&why);
  if (node < 0) GTEST_SKIP() << why;
  const std::string name = "/lanes-test-numa-" + std::to_string(::getpid());
  const size_t bytes = 32 * kPage;
  long blocksInHook = -1;
  Status placed = internalError("hook not called");
  auto hook = [&](void* base, size_t size) {
    struct stat st {};
    // Until it is complete the segment has its build name (shm_segment.h).
    if (::stat(("/dev/shm" + name + ".new").c_str(), &st) == 0) blocksInHook = st.st_blocks;
    placed = applyPreferredNode(base, size, node);
  };
  ShmSegment creator;
  Status s = ShmSegment::create(name, bytes, bytes, &creator, hook);
  ASSERT_TRUE(s) << s.message();
  ASSERT_TRUE(placed) << placed.message();
  EXPECT_EQ(blocksInHook, 0) << "pages were allocated before the policy was set";
  struct stat st {};
  ASSERT_EQ(::stat(("/dev/shm" + name).c_str(), &st), 0);
  EXPECT_GE(static_cast<size_t>(st.st_blocks) * 512, bytes) << "the segment was not reserved";

  ShmSegment peer;
  s = ShmSegment::open(name, bytes, &peer);
  creator.unlink();
  ASSERT_TRUE(s) << s.message();
  Policy p;
  ASSERT_TRUE(policyAt(static_cast<std::byte*>(peer.data()) + 7 * kPage, &p)) << errno;
  EXPECT_EQ(p.mode, MPOL_PREFERRED) << "the policy did not reach the shared file";
  EXPECT_EQ(p.node, node);
  std::memset(peer.data(), 1, bytes);
  for (size_t off = 0; off < bytes; off += kPage) {
    EXPECT_EQ(nodeOfPage(static_cast<std::byte*>(peer.data()) + off), node) << off;
    EXPECT_EQ(nodeOfPage(static_cast<std::byte*>(creator.data()) + off), node) << off;
  }
}

TEST(NumaPolicy, PageAlignedRangesGivePagesToTheOwnerOfTheirFirstByte) {
  // Three owners of 6000 bytes each in an 18000-byte mapping (5 pages).
  std::vector<NumaRange> wanted{{12000, 6000, 1}, {0, 6000, 0}, {6000, 6000, 1}};
  EXPECT_EQ(pageAlignedRanges(wanted, 18000, 4096),
            (std::vector<NumaRange>{{0, 8192, 0}, {8192, 12288, 1}}));
  // Unknown owners are left out; nothing runs past the last page.
  wanted[1].node = -1;
  EXPECT_EQ(pageAlignedRanges(wanted, 18000, 4096), (std::vector<NumaRange>{{8192, 12288, 1}}));
  // An owner smaller than a page that holds no page's first byte gets none.
  EXPECT_EQ(pageAlignedRanges({{100, 200, 3}}, 4096, 4096), std::vector<NumaRange>{});
  EXPECT_EQ(pageAlignedRanges({}, 4096, 4096), std::vector<NumaRange>{});
}

TEST(NumaPolicy, MostCommonNodeAndDescription) {
  EXPECT_EQ(mostCommonNode({0, 1, 1}, 0), 1);
  EXPECT_EQ(mostCommonNode({0, 1}, 1), 1);   // tie: the preferred one
  EXPECT_EQ(mostCommonNode({2, 1}, -1), 1);  // tie, no preference: the lowest
  EXPECT_EQ(mostCommonNode({-1, -1}, 0), -1);
  EXPECT_EQ(describeRankNodes({1, -1}, "slots"),
            "rank 0 slots on NUMA node 1, rank 1 slots on an unknown node");
}

StageArenaConfig smallConfig(bool hostData) {
  StageArenaConfig c;
  c.chunkBytes = 64 * 1024;
  c.slots = 2;
  c.hostData = hostData;
  return c;
}

TEST(StageArenaPlacement, InputsOnEachRanksNodeResultsOnTheCommonNode) {
  StageArenaLayout l(2, smallConfig(true));
  ASSERT_EQ(l.flagsBytes, 4096u);
  const size_t rankBytes = 2 * 64 * 1024;
  // Tie between nodes 1 and 0: the creator's (rank 0's) node takes the
  // flags and the results; the flags page merges with rank 0's inputs.
  EXPECT_EQ(stageArenaPlacement(l, {1, 0}),
            (std::vector<NumaRange>{{0, 4096 + rankBytes, 1},
                                    {l.inputOffset(1, 0), rankBytes, 0},
                                    {l.resultOffset(0), rankBytes, 1}}));
  // Everyone on one node: one range over the whole segment.
  EXPECT_EQ(stageArenaPlacement(l, {0, 0}), (std::vector<NumaRange>{{0, l.totalBytes(), 0}}));
  EXPECT_EQ(stageArenaPlacement(l, {-1, -1}), std::vector<NumaRange>{});
  // The wrong number of entries places nothing rather than the wrong bytes.
  EXPECT_EQ(stageArenaPlacement(l, {0}), std::vector<NumaRange>{});
}

TEST(StageArenaPlacement, UnknownRankIsLeftOutAndMajorityTakesTheResults) {
  StageArenaLayout l(4, smallConfig(true));
  const size_t rankBytes = 2 * 64 * 1024;
  std::vector<NumaRange> ranges = stageArenaPlacement(l, {0, -1, 1, 1});
  EXPECT_EQ(stageArenaSharedNode({0, -1, 1, 1}), 1);
  EXPECT_EQ(ranges, (std::vector<NumaRange>{
                        {0, 4096, 1},
                        {l.inputOffset(0, 0), rankBytes, 0},
                        {l.inputOffset(2, 0), l.totalBytes() - l.inputOffset(2, 0), 1}}));
  // Every byte of a placed range lies inside the segment and on a page boundary.
  for (const NumaRange& r : ranges) {
    EXPECT_EQ(r.offset % 4096, 0u);
    EXPECT_EQ(r.bytes % 4096, 0u);
    EXPECT_LE(r.offset + r.bytes, l.totalBytes());
  }
}

TEST(StageArenaPlacement, FlagsOnlyWhenTheSlotsLiveInGpuMemory) {
  StageArenaLayout l(2, smallConfig(false));
  EXPECT_EQ(l.totalBytes(), l.flagsBytes);
  EXPECT_EQ(stageArenaPlacement(l, {1, 1}), (std::vector<NumaRange>{{0, l.flagsBytes, 1}}));
}

}  // namespace
}  // namespace lanes
