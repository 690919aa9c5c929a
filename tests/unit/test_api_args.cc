// Argument checks of the public C API, on a one-rank communicator: every bad
// argument gives the documented result code and a lanesGetLastError sentence
// naming the argument, and nothing touches the buffers of a rejected call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "lanes/lanes.h"

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// lanesGetLastError(comm) names `word` (case-insensitive).
::testing::AssertionResult lastErrorMentions(lanesComm_t comm, const std::string& word) {
  const char* msg = lanesGetLastError(comm);
  if (msg == nullptr) return ::testing::AssertionFailure() << "lanesGetLastError returned NULL";
  if (lower(msg).find(lower(word)) == std::string::npos)
    return ::testing::AssertionFailure()
           << "last error \"" << msg << "\" does not mention \"" << word << "\"";
  return ::testing::AssertionSuccess();
}

// A buffer that must not be touched by rejected calls: filled with a
// sentinel and checked afterwards.
class Untouched {
 public:
  explicit Untouched(size_t bytes) : data_(bytes, 0x5a) {}
  void* get() { return data_.data(); }
  uint8_t* bytes() { return data_.data(); }
  bool intact() const {
    return std::all_of(data_.begin(), data_.end(), [](uint8_t b) { return b == 0x5a; });
  }

 private:
  std::vector<uint8_t> data_;
};

constexpr int kBadType = lanesNumTypes;  // one past the last valid datatype

class ApiArgs : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(lanesCommInitAll(&comm_, 1, nullptr), lanesSuccess) << lanesGetLastError(nullptr);
    ASSERT_NE(comm_, nullptr);
  }
  void TearDown() override {
    if (comm_ != nullptr) {
      EXPECT_EQ(lanesCommDestroy(comm_), lanesSuccess);
    }
  }
  lanesComm_t comm_ = nullptr;
};

TEST_F(ApiArgs, NullCommIsRejectedEverywhere) {
  float buf[4] = {};
  EXPECT_EQ(lanesAllReduce(buf, buf, 4, lanesFloat32, lanesSum, nullptr, nullptr),
            lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(nullptr, "comm"));
  EXPECT_EQ(lanesBroadcast(buf, buf, 4, lanesFloat32, 0, nullptr, nullptr), lanesInvalidArgument);
  EXPECT_EQ(lanesReduce(buf, buf, 4, lanesFloat32, lanesSum, 0, nullptr, nullptr),
            lanesInvalidArgument);
  EXPECT_EQ(lanesAllGather(buf, buf, 4, lanesFloat32, nullptr, nullptr), lanesInvalidArgument);
  EXPECT_EQ(lanesReduceScatter(buf, buf, 4, lanesFloat32, lanesSum, nullptr, nullptr),
            lanesInvalidArgument);
  EXPECT_EQ(lanesAlltoAll(buf, buf + 2, 1, lanesFloat32, nullptr, nullptr), lanesInvalidArgument);
  EXPECT_EQ(lanesGather(buf, buf, 4, lanesFloat32, 0, nullptr, nullptr), lanesInvalidArgument);
  EXPECT_EQ(lanesScatter(buf, buf, 4, lanesFloat32, 0, nullptr, nullptr), lanesInvalidArgument);
  EXPECT_EQ(lanesSend(buf, 4, lanesFloat32, 0, nullptr, nullptr), lanesInvalidArgument);
  EXPECT_EQ(lanesRecv(buf, 4, lanesFloat32, 0, nullptr, nullptr), lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(nullptr, "comm"));
  int v = 0;
  EXPECT_EQ(lanesCommCount(nullptr, &v), lanesInvalidArgument);
  EXPECT_EQ(lanesCommUserRank(nullptr, &v), lanesInvalidArgument);
  EXPECT_EQ(lanesCommCuDevice(nullptr, &v), lanesInvalidArgument);
  lanesResult_t async;
  EXPECT_EQ(lanesCommGetAsyncError(nullptr, &async), lanesInvalidArgument);
  EXPECT_EQ(lanesCommFinalize(nullptr), lanesInvalidArgument);
  // As NCCL: destroying or aborting NULL is a no-op, like free(NULL).
  EXPECT_EQ(lanesCommDestroy(nullptr), lanesSuccess);
  EXPECT_EQ(lanesCommAbort(nullptr), lanesSuccess);
  lanesComm_t sub = nullptr;
  EXPECT_EQ(lanesCommSplit(nullptr, 0, 0, &sub, nullptr), lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(nullptr, "comm"));
}

TEST_F(ApiArgs, NullBuffersWithCountAreRejected) {
  float buf[8] = {};
  EXPECT_EQ(lanesAllReduce(nullptr, buf, 8, lanesFloat32, lanesSum, comm_, nullptr),
            lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm_, "sendbuff"));
  EXPECT_EQ(lanesAllReduce(buf, nullptr, 8, lanesFloat32, lanesSum, comm_, nullptr),
            lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm_, "recvbuff"));
  EXPECT_EQ(lanesAllGather(buf, nullptr, 8, lanesFloat32, comm_, nullptr), lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm_, "recvbuff"));
  EXPECT_EQ(lanesReduceScatter(nullptr, buf, 8, lanesFloat32, lanesSum, comm_, nullptr),
            lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm_, "sendbuff"));
  // Rank 0 is the root here, so its buffers are significant.
  EXPECT_EQ(lanesBroadcast(nullptr, buf, 8, lanesFloat32, 0, comm_, nullptr), lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm_, "sendbuff"));
  EXPECT_EQ(lanesReduce(buf, nullptr, 8, lanesFloat32, lanesSum, 0, comm_, nullptr),
            lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm_, "recvbuff"));
  EXPECT_EQ(lanesGather(buf, nullptr, 8, lanesFloat32, 0, comm_, nullptr), lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm_, "recvbuff"));
  EXPECT_EQ(lanesScatter(nullptr, buf, 8, lanesFloat32, 0, comm_, nullptr), lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm_, "sendbuff"));
  EXPECT_EQ(lanesAlltoAll(nullptr, buf, 8, lanesFloat32, comm_, nullptr), lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm_, "sendbuff"));
  EXPECT_EQ(lanesSend(nullptr, 8, lanesFloat32, 0, comm_, nullptr), lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm_, "sendbuff"));
  EXPECT_EQ(lanesRecv(nullptr, 8, lanesFloat32, 0, comm_, nullptr), lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm_, "recvbuff"));
}

TEST_F(ApiArgs, NullBuffersWithZeroCountAreFine) {
  EXPECT_EQ(lanesAllReduce(nullptr, nullptr, 0, lanesFloat32, lanesSum, comm_, nullptr),
            lanesSuccess)
      << lanesGetLastError(comm_);
  EXPECT_EQ(lanesAllGather(nullptr, nullptr, 0, lanesInt8, comm_, nullptr), lanesSuccess)
      << lanesGetLastError(comm_);
  EXPECT_EQ(lanesBroadcast(nullptr, nullptr, 0, lanesInt8, 0, comm_, nullptr), lanesSuccess)
      << lanesGetLastError(comm_);
}

TEST_F(ApiArgs, UnknownDatatypeIsRejected) {
  Untouched buf(64);
  for (int t : {kBadType, -1, 1000}) {
    auto type = static_cast<lanesDataType_t>(t);
    EXPECT_EQ(lanesAllReduce(buf.get(), buf.get(), 4, type, lanesSum, comm_, nullptr),
              lanesInvalidArgument)
        << "datatype " << t;
    EXPECT_TRUE(lastErrorMentions(comm_, "datatype"));
    EXPECT_EQ(lanesBroadcast(buf.get(), buf.get(), 4, type, 0, comm_, nullptr),
              lanesInvalidArgument);
    EXPECT_TRUE(lastErrorMentions(comm_, "datatype"));
    EXPECT_EQ(lanesSend(buf.get(), 4, type, 0, comm_, nullptr), lanesInvalidArgument);
    EXPECT_TRUE(lastErrorMentions(comm_, "datatype"));
  }
  EXPECT_TRUE(buf.intact());
}

TEST_F(ApiArgs, UnknownOpIsRejected) {
  Untouched buf(64);
  for (int op : {static_cast<int>(lanesNumOps), -1, 12345}) {
    auto o = static_cast<lanesRedOp_t>(op);
    EXPECT_EQ(lanesAllReduce(buf.get(), buf.get(), 4, lanesFloat32, o, comm_, nullptr),
              lanesInvalidArgument)
        << "op " << op;
    EXPECT_TRUE(lastErrorMentions(comm_, "op"));
    EXPECT_EQ(lanesReduce(buf.get(), buf.get(), 4, lanesFloat32, o, 0, comm_, nullptr),
              lanesInvalidArgument);
    EXPECT_EQ(lanesReduceScatter(buf.get(), buf.get(), 4, lanesFloat32, o, comm_, nullptr),
              lanesInvalidArgument);
    EXPECT_TRUE(lastErrorMentions(comm_, "op"));
  }
  EXPECT_TRUE(buf.intact());
}

TEST_F(ApiArgs, DestroyedPreMulSumOpIsRejected) {
  float scalar = 2.0f;
  lanesRedOp_t op;
  ASSERT_EQ(lanesRedOpCreatePreMulSum(&op, &scalar, lanesFloat32, lanesScalarHostImmediate, comm_),
            lanesSuccess)
      << lanesGetLastError(comm_);
  float in[4] = {1, 2, 3, 4}, out[4] = {};
  ASSERT_EQ(lanesAllReduce(in, out, 4, lanesFloat32, op, comm_, nullptr), lanesSuccess);
  EXPECT_EQ(out[3], 8.0f);
  ASSERT_EQ(lanesRedOpDestroy(op, comm_), lanesSuccess);
  EXPECT_EQ(lanesAllReduce(in, out, 4, lanesFloat32, op, comm_, nullptr), lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm_, "op"));
  EXPECT_NE(lanesRedOpDestroy(op, comm_), lanesSuccess) << "double destroy of an op";
  EXPECT_EQ(lanesRedOpDestroy(lanesSum, comm_), lanesInvalidArgument) << "destroying a built-in";
}

TEST_F(ApiArgs, PreMulSumArgumentsAreChecked) {
  float scalar = 2.0f;
  lanesRedOp_t op;
  EXPECT_EQ(
      lanesRedOpCreatePreMulSum(nullptr, &scalar, lanesFloat32, lanesScalarHostImmediate, comm_),
      lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm_, "op"));
  EXPECT_EQ(lanesRedOpCreatePreMulSum(&op, nullptr, lanesFloat32, lanesScalarHostImmediate, comm_),
            lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm_, "scalar"));
  EXPECT_EQ(lanesRedOpCreatePreMulSum(&op, &scalar, static_cast<lanesDataType_t>(kBadType),
                                      lanesScalarHostImmediate, comm_),
            lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm_, "datatype"));
  EXPECT_EQ(lanesRedOpCreatePreMulSum(&op, &scalar, lanesFloat32,
                                      static_cast<lanesScalarResidence_t>(7), comm_),
            lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm_, "residence"));
  EXPECT_EQ(
      lanesRedOpCreatePreMulSum(&op, &scalar, lanesFloat32, lanesScalarHostImmediate, nullptr),
      lanesInvalidArgument);
}

TEST_F(ApiArgs, RootAndPeerOutOfRangeAreRejected) {
  Untouched buf(64);
  for (int bad : {1, -1, 1 << 30}) {
    EXPECT_EQ(lanesBroadcast(buf.get(), buf.get(), 4, lanesFloat32, bad, comm_, nullptr),
              lanesInvalidArgument)
        << "root " << bad;
    EXPECT_TRUE(lastErrorMentions(comm_, "root"));
    EXPECT_EQ(lanesReduce(buf.get(), buf.get(), 4, lanesFloat32, lanesSum, bad, comm_, nullptr),
              lanesInvalidArgument);
    EXPECT_TRUE(lastErrorMentions(comm_, "root"));
    EXPECT_EQ(lanesGather(buf.get(), buf.get(), 4, lanesFloat32, bad, comm_, nullptr),
              lanesInvalidArgument);
    EXPECT_TRUE(lastErrorMentions(comm_, "root"));
    EXPECT_EQ(lanesScatter(buf.get(), buf.get(), 4, lanesFloat32, bad, comm_, nullptr),
              lanesInvalidArgument);
    EXPECT_TRUE(lastErrorMentions(comm_, "root"));
    EXPECT_EQ(lanesSend(buf.get(), 4, lanesFloat32, bad, comm_, nullptr), lanesInvalidArgument)
        << "peer " << bad;
    EXPECT_TRUE(lastErrorMentions(comm_, "peer"));
    EXPECT_EQ(lanesRecv(buf.get(), 4, lanesFloat32, bad, comm_, nullptr), lanesInvalidArgument);
    EXPECT_TRUE(lastErrorMentions(comm_, "peer"));
  }
  EXPECT_TRUE(buf.intact());
}

// count * element size (* nranks) overflowing size_t must be caught before
// anything is touched (the pointers here point at a few bytes only).
TEST_F(ApiArgs, CountTimesSizeOverflowIsRejected) {
  Untouched a(64), b(64);
  const size_t huge = SIZE_MAX / 2;
  EXPECT_EQ(lanesAllReduce(a.get(), b.get(), huge, lanesFloat32, lanesSum, comm_, nullptr),
            lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm_, "count"));
  EXPECT_EQ(lanesAllGather(a.get(), b.get(), SIZE_MAX / 4 + 1, lanesFloat32, comm_, nullptr),
            lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm_, "count"));
  EXPECT_EQ(lanesSend(a.get(), SIZE_MAX / 8 + 1, lanesFloat64, 0, comm_, nullptr),
            lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm_, "count"));
  EXPECT_EQ(lanesAlltoAll(a.get(), b.get(), SIZE_MAX, lanesInt8, comm_, nullptr),
            lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm_, "count"));
  EXPECT_TRUE(a.intact());
  EXPECT_TRUE(b.intact());
}

// Buffers either are the exact in-place layout or disjoint; partial overlap
// has no meaning (NCCL's rules).
TEST_F(ApiArgs, IllegalAliasingIsRejected) {
  Untouched buf(256);
  uint8_t* p = buf.bytes();
  // All-reduce: recvbuff one element past sendbuff.
  EXPECT_EQ(lanesAllReduce(p, p + 4, 16, lanesFloat32, lanesSum, comm_, nullptr),
            lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm_, "recvbuff"));
  // Reduce-scatter (1 rank: in-place means recvbuff == sendbuff): shifted.
  EXPECT_EQ(lanesReduceScatter(p, p + 4, 16, lanesFloat32, lanesSum, comm_, nullptr),
            lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm_, "recvbuff"));
  EXPECT_EQ(lanesReduceScatter(p + 8, p, 16, lanesFloat32, lanesSum, comm_, nullptr),
            lanesInvalidArgument);
  // All-gather (in-place: sendbuff == recvbuff + rank*count): shifted.
  EXPECT_EQ(lanesAllGather(p + 4, p, 16, lanesFloat32, comm_, nullptr), lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm_, "sendbuff"));
  // All-to-all: in place means sendbuff == recvbuff (as nccl-tests runs it); shifted is not.
  EXPECT_EQ(lanesAlltoAll(p, p + 4, 16, lanesFloat32, comm_, nullptr), lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm_, "overlap"));
  EXPECT_TRUE(buf.intact());
  // The exact in-place layouts are accepted.
  float v[4] = {1, 2, 3, 4};
  EXPECT_EQ(lanesAllReduce(v, v, 4, lanesFloat32, lanesSum, comm_, nullptr), lanesSuccess);
  EXPECT_EQ(lanesReduceScatter(v, v, 4, lanesFloat32, lanesSum, comm_, nullptr), lanesSuccess);
  EXPECT_EQ(lanesAllGather(v, v, 4, lanesFloat32, comm_, nullptr), lanesSuccess);
  EXPECT_EQ(v[2], 3.0f);
}

TEST(ApiArgsLifecycle, UseAfterDestroyIsRejected) {
  lanesComm_t comm = nullptr;
  ASSERT_EQ(lanesCommInitAll(&comm, 1, nullptr), lanesSuccess) << lanesGetLastError(nullptr);
  ASSERT_EQ(lanesCommDestroy(comm), lanesSuccess);
  // No new communicator is created below, so the freed address cannot be
  // reused by a live one: the registry must say "not live".
  float buf[4] = {};
  EXPECT_EQ(lanesAllReduce(buf, buf, 4, lanesFloat32, lanesSum, comm, nullptr),
            lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(nullptr, "destroyed"));
  int v = 0;
  EXPECT_EQ(lanesCommCount(comm, &v), lanesInvalidArgument);
  EXPECT_EQ(lanesCommUserRank(comm, &v), lanesInvalidArgument);
  EXPECT_EQ(lanesSend(buf, 4, lanesFloat32, 0, comm, nullptr), lanesInvalidArgument);
  lanesComm_t sub = nullptr;
  EXPECT_EQ(lanesCommSplit(comm, 0, 0, &sub, nullptr), lanesInvalidArgument);
  EXPECT_EQ(lanesCommDestroy(comm), lanesInvalidArgument) << "double destroy";
  EXPECT_EQ(lanesCommAbort(comm), lanesInvalidArgument) << "abort after destroy";
}

TEST(ApiArgsLifecycle, GroupMisuse) {
  EXPECT_EQ(lanesGroupEnd(), lanesInvalidUsage);
  EXPECT_TRUE(lastErrorMentions(nullptr, "lanesGroupStart"));
  // Balanced nesting is fine.
  EXPECT_EQ(lanesGroupStart(), lanesSuccess);
  EXPECT_EQ(lanesGroupStart(), lanesSuccess);
  EXPECT_EQ(lanesGroupEnd(), lanesSuccess);
  EXPECT_EQ(lanesGroupEnd(), lanesSuccess);
  EXPECT_EQ(lanesGroupEnd(), lanesInvalidUsage) << "one End too many";
}

TEST(ApiArgsLifecycle, SelfSendOutsideGroupIsInvalidUsage) {
  lanesComm_t comm = nullptr;
  ASSERT_EQ(lanesCommInitAll(&comm, 1, nullptr), lanesSuccess) << lanesGetLastError(nullptr);
  float buf[4] = {};
  // Would wait forever for its own matching receive.
  EXPECT_EQ(lanesSend(buf, 4, lanesFloat32, 0, comm, nullptr), lanesInvalidUsage);
  EXPECT_TRUE(lastErrorMentions(comm, "group"));
  // Inside a group the pair completes.
  float in[4] = {1, 2, 3, 4}, out[4] = {};
  ASSERT_EQ(lanesGroupStart(), lanesSuccess);
  EXPECT_EQ(lanesSend(in, 4, lanesFloat32, 0, comm, nullptr), lanesSuccess);
  EXPECT_EQ(lanesRecv(out, 4, lanesFloat32, 0, comm, nullptr), lanesSuccess);
  ASSERT_EQ(lanesGroupEnd(), lanesSuccess) << lanesGetLastError(comm);
  EXPECT_EQ(out[3], 4.0f);
  EXPECT_EQ(lanesCommDestroy(comm), lanesSuccess);
}

TEST(ApiArgsLifecycle, ErrorStringsForEveryCode) {
  std::set<std::string> seen;
  for (int code = lanesSuccess; code < lanesNumResults; ++code) {
    const char* s = lanesGetErrorString(static_cast<lanesResult_t>(code));
    ASSERT_NE(s, nullptr) << "code " << code;
    EXPECT_GT(std::string(s).size(), 3u) << "code " << code;
    EXPECT_TRUE(seen.insert(s).second) << "code " << code << " shares its string: " << s;
  }
  for (int bad : {static_cast<int>(lanesNumResults), -1, 999}) {
    const char* s = lanesGetErrorString(static_cast<lanesResult_t>(bad));
    ASSERT_NE(s, nullptr) << "code " << bad;
    EXPECT_FALSE(std::string(s).empty());
  }
}

TEST(ApiArgsLifecycle, Version) {
  int version = -1;
  ASSERT_EQ(lanesGetVersion(&version), lanesSuccess);
  EXPECT_EQ(version, LANES_VERSION_CODE);
  EXPECT_EQ(lanesGetVersion(nullptr), lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(nullptr, "version"));
}

TEST(ApiArgsLifecycle, LastErrorIsNeverNull) {
  EXPECT_NE(lanesGetLastError(nullptr), nullptr);
  int dummy = 0;
  EXPECT_NE(lanesGetLastError(reinterpret_cast<lanesComm_t>(&dummy)), nullptr);
}

TEST(ApiArgsLifecycle, InitArgumentsAreChecked) {
  lanesUniqueId id;
  EXPECT_EQ(lanesGetUniqueId(nullptr), lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(nullptr, "uniqueId"));
  ASSERT_EQ(lanesGetUniqueId(&id), lanesSuccess) << lanesGetLastError(nullptr);
  lanesComm_t comm = nullptr;
  EXPECT_EQ(lanesCommInitRank(nullptr, 1, id, 0), lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(nullptr, "comm"));
  EXPECT_EQ(lanesCommInitRank(&comm, 0, id, 0), lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(nullptr, "nranks"));
  EXPECT_EQ(lanesCommInitRank(&comm, 1, id, 1), lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(nullptr, "rank"));
  EXPECT_EQ(lanesCommInitRank(&comm, 1, id, -1), lanesInvalidArgument);
  EXPECT_EQ(lanesCommInitAll(nullptr, 1, nullptr), lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(nullptr, "comms"));
  lanesComm_t comms[1];
  EXPECT_EQ(lanesCommInitAll(comms, 0, nullptr), lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(nullptr, "ndev"));

  // Config with a bad magic: rejected without joining; the same id then
  // still works with a good config (and consumes the root's rendezvous).
  lanesConfig_t bad = LANES_CONFIG_INITIALIZER;
  bad.magic = 0xdeadbeef;
  EXPECT_EQ(lanesCommInitRankConfig(&comm, 1, id, 0, &bad), lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(nullptr, "magic"));
  lanesConfig_t badBlocking = LANES_CONFIG_INITIALIZER;
  badBlocking.blocking = 7;
  EXPECT_EQ(lanesCommInitRankConfig(&comm, 1, id, 0, &badBlocking), lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(nullptr, "blocking"));
  lanesConfig_t badTimeout = LANES_CONFIG_INITIALIZER;
  badTimeout.timeoutSeconds = -3;
  EXPECT_EQ(lanesCommInitRankConfig(&comm, 1, id, 0, &badTimeout), lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(nullptr, "timeoutSeconds"));

  lanesConfig_t good = LANES_CONFIG_INITIALIZER;
  good.commName = "api-args";
  ASSERT_EQ(lanesCommInitRankConfig(&comm, 1, id, 0, &good), lanesSuccess)
      << lanesGetLastError(nullptr);
  int count = 0, rank = -1;
  EXPECT_EQ(lanesCommCount(comm, &count), lanesSuccess);
  EXPECT_EQ(lanesCommUserRank(comm, &rank), lanesSuccess);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(lanesCommCount(comm, nullptr), lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm, "count"));
  EXPECT_EQ(lanesCommUserRank(comm, nullptr), lanesInvalidArgument);
  lanesResult_t async = lanesInternalError;
  EXPECT_EQ(lanesCommGetAsyncError(comm, &async), lanesSuccess);
  EXPECT_EQ(async, lanesSuccess);
  EXPECT_EQ(lanesCommGetAsyncError(comm, nullptr), lanesInvalidArgument);

  lanesComm_t sub = nullptr;
  EXPECT_EQ(lanesCommSplit(comm, 0, 0, nullptr, nullptr), lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm, "newcomm"));
  EXPECT_EQ(lanesCommSplit(comm, -5, 0, &sub, nullptr), lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm, "color"));
  EXPECT_EQ(lanesCommSplit(comm, 0, 0, &sub, &bad), lanesInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(comm, "magic"));
  EXPECT_EQ(lanesCommDestroy(comm), lanesSuccess);
}

}  // namespace
