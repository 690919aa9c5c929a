// Call signatures (LANES_CHECK_MISMATCH), progress reports and the hang
// diagnosis sentence: encoding round trips and the comparisons that decide
// whether ranks called the same thing.
#include <gtest/gtest.h>

#include <latch>
#include <thread>

#include "bootstrap/bootstrap.h"
#include "core/op_signature.h"
#include "core/progress.h"
#include "core/watchdog.h"
#include "exec/request.h"

namespace lanes {
namespace {

OpSignature coll(CollType kind, uint64_t count, lanesDataType_t type, RedOpKind op = RedOpKind::Sum,
                 int root = 0) {
  OpSignature s;
  s.coll = kind;
  s.count = count;
  s.datatype = static_cast<uint8_t>(type);
  s.redop = static_cast<uint8_t>(op);
  s.root = root;
  return s;
}

OpSignature p2p(P2pSide side, uint64_t count, lanesDataType_t type, int peer) {
  OpSignature s;
  s.p2p = side;
  s.count = count;
  s.datatype = static_cast<uint8_t>(type);
  s.root = peer;
  return s;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(MismatchSignature, EncodeDecodeRoundTrip) {
  std::vector<OpSignature> sigs = {
      coll(CollType::AllReduce, 1u << 20, lanesFloat32, RedOpKind::Max),
      coll(CollType::Broadcast, 7, lanesInt64, RedOpKind::Sum, 3),
      p2p(P2pSide::Send, (1ull << 40) + 5, lanesUint8, 12),
  };
  std::vector<uint8_t> bytes = encodeSignatures(41, sigs);
  EXPECT_EQ(bytes.size(), 12 + 3 * kSignatureBytes);
  uint64_t first = 0;
  std::vector<OpSignature> back;
  ASSERT_TRUE(decodeSignatures(bytes, &first, &back).isOk());
  EXPECT_EQ(first, 41u);
  EXPECT_EQ(back, sigs);
}

// The bytes a peer reads: the kind byte is the CollType value for a
// collective, 16 for a send and 17 for a receive.
TEST(MismatchSignature, WireBytes) {
  std::vector<uint8_t> bytes = encodeSignatures(
      0x0102030405060708ull,
      {coll(CollType::Scatter, 0x1234, lanesInt32, RedOpKind::Sum, 0x0a0b0c0d),
       p2p(P2pSide::Send, 5, lanesUint8, 2), p2p(P2pSide::Recv, 6, lanesFloat64, 3)});
  const uint8_t i32 = static_cast<uint8_t>(lanesInt32), u8 = static_cast<uint8_t>(lanesUint8),
                f64 = static_cast<uint8_t>(lanesFloat64);
  std::vector<uint8_t> want = {8, 7, 6, 5, 4, 3, 2, 1, 3, 0, 0, 0};  // first index, calls
  auto call = [&want](std::initializer_list<uint8_t> b) { want.insert(want.end(), b); };
  call({7, i32, 0, 0, 0x0d, 0x0c, 0x0b, 0x0a, 0x34, 0x12, 0, 0, 0, 0, 0, 0});
  call({16, u8, 0, 0, 2, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0});
  call({17, f64, 0, 0, 3, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0});
  EXPECT_EQ(bytes, want);
  // A kind byte this build does not know survives a round trip unchanged.
  bytes[12] = 42;
  uint64_t first = 0;
  std::vector<OpSignature> back;
  ASSERT_TRUE(decodeSignatures(bytes, &first, &back).isOk());
  EXPECT_EQ(encodeSignatures(first, back), bytes);
  EXPECT_EQ(describeSignature(back[0]), "unknown(count 4660 int32)");
}

TEST(MismatchSignature, DecodeRejectsMalformed) {
  std::vector<uint8_t> bytes = encodeSignatures(0, {coll(CollType::AllReduce, 4, lanesFloat32)});
  uint64_t first = 0;
  std::vector<OpSignature> out;
  std::vector<uint8_t> shortened(bytes.begin(), bytes.end() - 1);
  EXPECT_FALSE(decodeSignatures(shortened, &first, &out).isOk());
  EXPECT_FALSE(decodeSignatures(std::vector<uint8_t>(5), &first, &out).isOk());
}

TEST(MismatchSignature, SignatureOfRequests) {
  Request r;
  r.args.coll = CollType::Reduce;
  r.args.count = 99;
  r.args.type = lanesFloat16;
  r.args.root = 2;
  r.op.kind = RedOpKind::Avg;
  OpSignature s = signatureOf(r);
  EXPECT_EQ(describeSignature(s), "reduce(count 99 float16 avg root 2)");
  // No op or root where the collective has none: they cannot cause a mismatch.
  r.args.coll = CollType::AllGather;
  EXPECT_EQ(describeSignature(signatureOf(r)), "allgather(count 99 float16)");
  Request send;
  send.isP2p = true;
  send.isSend = true;
  send.peer = 5;
  send.args.count = 10;
  send.args.type = lanesInt32;
  EXPECT_EQ(describeSignature(signatureOf(send)), "send(count 10 int32 to rank 5)");
}

TEST(MismatchSignature, EqualCollectivesMatch) {
  std::vector<OpSignature> calls = {coll(CollType::AllReduce, 8, lanesFloat32),
                                    coll(CollType::Broadcast, 8, lanesInt32, RedOpKind::Sum, 1)};
  EXPECT_EQ(findCollectiveMismatch({calls, calls, calls}, 0), "");
}

TEST(MismatchSignature, KindMismatchNamesBothCalls) {
  std::vector<OpSignature> a = {coll(CollType::AllReduce, 1024, lanesFloat32)};
  std::vector<OpSignature> b = {coll(CollType::Broadcast, 1024, lanesInt32, RedOpKind::Sum, 0)};
  std::string m = findCollectiveMismatch({a, b, a}, 7);
  EXPECT_TRUE(contains(m, "collective #7")) << m;
  EXPECT_TRUE(contains(m, "rank 1 called broadcast(count 1024 int32 root 0)")) << m;
  EXPECT_TRUE(contains(m, "rank 0 called allreduce(count 1024 float32 sum)")) << m;
  EXPECT_TRUE(contains(m, "collective, datatype")) << m;
}

TEST(MismatchSignature, CountDatatypeOpRootMismatches) {
  OpSignature ref = coll(CollType::Reduce, 100, lanesFloat32, RedOpKind::Sum, 0);
  OpSignature count = ref, type = ref, op = ref, root = ref;
  count.count = 50;
  type.datatype = lanesFloat64;
  op.redop = static_cast<uint8_t>(RedOpKind::Max);
  root.root = 1;
  EXPECT_TRUE(contains(findCollectiveMismatch({{ref}, {ref}, {count}}, 0), "rank 2")) << "count";
  EXPECT_TRUE(contains(findCollectiveMismatch({{ref}, {count}}, 0), "differ in count"));
  EXPECT_TRUE(contains(findCollectiveMismatch({{ref}, {type}}, 0), "differ in datatype"));
  EXPECT_TRUE(contains(findCollectiveMismatch({{ref}, {op}}, 0), "differ in reduction op"));
  EXPECT_TRUE(contains(findCollectiveMismatch({{ref}, {root}}, 0), "differ in root"));
}

TEST(MismatchSignature, DifferentNumberOfCollectivesInAGroup) {
  OpSignature x = coll(CollType::AllReduce, 8, lanesFloat32);
  std::string m = findCollectiveMismatch({{x, x}, {x}}, 3);
  EXPECT_TRUE(contains(m, "rank 1 issued 1 collective (from #3) while rank 0 issued 2")) << m;
}

TEST(MismatchSignature, SendRecvPairs) {
  // Rank 0 sends 1024 floats to 1 and receives 4 ints from it.
  std::vector<OpSignature> r0 = {p2p(P2pSide::Send, 1024, lanesFloat32, 1),
                                 p2p(P2pSide::Recv, 4, lanesInt32, 1)};
  std::vector<OpSignature> r1 = {p2p(P2pSide::Recv, 1024, lanesFloat32, 0),
                                 p2p(P2pSide::Send, 4, lanesInt32, 0)};
  EXPECT_EQ(findP2pMismatch(0, r0, 1, r1), "");
  EXPECT_EQ(findP2pMismatch(1, r1, 0, r0), "");
  std::vector<OpSignature> bad = r1;
  bad[0].count = 512;
  std::string m0 = findP2pMismatch(0, r0, 1, bad);
  std::string m1 = findP2pMismatch(1, bad, 0, r0);
  EXPECT_EQ(m0, m1);  // both sides report the same sentence
  EXPECT_TRUE(contains(m0, "send(count 1024 float32 to rank 1)")) << m0;
  EXPECT_TRUE(contains(m0, "recv(count 512 float32 from rank 0)")) << m0;
  std::vector<OpSignature> missing = {r1[1]};  // no receive at all
  std::string m2 = findP2pMismatch(0, r0, 1, missing);
  EXPECT_TRUE(contains(m2,
                       "rank 0 posts 1 send to rank 1 in this group but rank 1 posts 0 "
                       "receives"))
      << m2;
}

TEST(MismatchSignature, ProgressReportRoundTripAndWords) {
  ProgressTracker t;
  ProgressReport idle = t.snapshot();
  EXPECT_EQ(idle.describe(), "no operation completed yet, no operation running");
  t.begin(0, coll(CollType::AllReduce, 8, lanesFloat32), 1);
  t.end(0, true);
  t.begin(1, coll(CollType::Broadcast, 16, lanesInt8, RedOpKind::Sum, 2), 3);
  ProgressReport r = t.snapshot();
  r.rank = 4;
  ProgressReport back;
  ASSERT_TRUE(ProgressReport::decode(r.encode(), &back));
  EXPECT_EQ(back.rank, 4);
  EXPECT_EQ(back.lastCompleted, 0);
  EXPECT_EQ(back.describe(),
            "last completed #0, now in broadcast #1 (count 16 int8 root 2) and 2 more call(s) of "
            "its group");
  EXPECT_FALSE(ProgressReport::decode(std::vector<uint8_t>(3), &back));
}

TEST(MismatchSignature, HangSentenceNamesWaitedAndAbsentRanks) {
  HangInfo hang;
  hang.seq = 5;
  hang.op = coll(CollType::AllReduce, 1024, lanesFloat32);
  hang.waitingFor = {3};
  std::vector<ProgressReport> reports(4);
  for (int r = 0; r < 4; ++r) reports[r].rank = r;
  // Rank 1 is in the same all-reduce; rank 2 never started it; rank 3 is
  // stuck in it too; rank 0 (self) is ignored.
  for (int r : {1, 3}) {
    reports[r].lastCompleted = 4;
    reports[r].current = 5;
    reports[r].currentOp = hang.op;
    reports[r].currentOps = 1;
    reports[r].state = ProgressReport::State::Running;
  }
  reports[2].lastCompleted = 4;
  std::string s = describeHang("allreduce #5 timed out", 0, hang, reports);
  EXPECT_TRUE(contains(s,
                       "still waiting for rank 3 (last completed #4, now in allreduce #5 "
                       "(count 1024 float32 sum))"))
      << s;
  EXPECT_TRUE(contains(s,
                       "not in this operation: rank 2 (last completed #4, no operation "
                       "running)"))
      << s;
  EXPECT_FALSE(contains(s, "rank 1 (")) << s;
  reports[3].rank = -1;  // no answer
  s = describeHang("x", 0, hang, reports);
  EXPECT_TRUE(contains(s, "rank 3 (no answer to the progress query)")) << s;
}

// The monitor thread answers a progress query with what the source returns;
// a peer without a source leaves the answer empty, within the deadline.
TEST(MismatchSignature, BootstrapAnswersProgressQueries) {
  lanesUniqueId raw;
  ASSERT_TRUE(createUniqueIdAndRoot("127.0.0.1:0", nullptr, &raw).isOk());
  UniqueIdData id;
  ASSERT_TRUE(decodeUniqueId(raw, &id).isOk());
  constexpr int n = 3;
  std::latch sourcesSet(n);
  std::vector<std::vector<std::vector<uint8_t>>> answers(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      RankInfo info;
      info.rank = r;
      info.pid = 100 + r;
      std::unique_ptr<Bootstrap> b;
      Status st = Bootstrap::create(id, n, info, Deadline::after(60), &b);
      ASSERT_TRUE(st.isOk()) << st.message();
      if (r == 1) b->setProgressSource([] { return std::vector<uint8_t>{1, 2, 3}; });
      sourcesSet.arrive_and_wait();
      if (r == 0) answers[0] = b->queryProgress({1, 2}, Deadline::after(1.0));
      ASSERT_TRUE(b->barrier(Deadline::after(60)).isOk());
      b->shutdown();
    });
  for (auto& t : threads) t.join();
  ASSERT_EQ(answers[0].size(), 2u);
  EXPECT_EQ(answers[0][0], (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_TRUE(answers[0][1].empty());  // rank 2 has nothing to say
}

}  // namespace
}  // namespace lanes
