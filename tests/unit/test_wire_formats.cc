// Compressed wire formats (kernels/cpu/wire_codec.h): float32 sums on the
// ring with bf16 or fp8 frames. Every rank must end with the same bits, the
// error must stay within docs/wire_formats.md's bound, and the frames must
// survive any split the transport makes (small rings wrap inside frames).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/algorithm.h"
#include "base/deadline.h"
#include "exec/host_executor.h"
#include "kernels/cpu/wire_codec.h"
#include "transport/common/loopback.h"

namespace lanes {
namespace {

// Unit roundoff of a format's values (half an ulp, relative) and, for fp8,
// the absolute floor of its subnormals relative to the frame's largest
// magnitude (half the smallest subnormal, 2^-10, over e4m3's largest, 448).
struct Rounding {
  double unit, floor;
};
Rounding roundingOf(WireFormat f) {
  switch (f) {
    case WireFormat::Bf16:
      return {std::ldexp(1.0, -8), 0};
    case WireFormat::Fp8:
      return {std::ldexp(1.0, -4), std::ldexp(1.0, -10) / 448};
    case WireFormat::Native:
      break;
  }
  return {0, 0};
}

TEST(WireCodec, NamesAndFrameSizes) {
  for (WireFormat f : {WireFormat::Native, WireFormat::Bf16, WireFormat::Fp8}) {
    WireFormat parsed{};
    ASSERT_TRUE(parseWireFormat(wireFormatName(f), &parsed));
    EXPECT_EQ(parsed, f);
  }
  WireFormat parsed = WireFormat::Fp8;
  EXPECT_TRUE(parseWireFormat("", &parsed));
  EXPECT_EQ(parsed, WireFormat::Native);
  EXPECT_FALSE(parseWireFormat("fp4", &parsed));
  const WireCodec bf16(WireFormat::Bf16), fp8(WireFormat::Fp8);
  EXPECT_EQ(bf16.wireBytes(0), 0u);
  EXPECT_EQ(bf16.wireBytes(9), 18u);  // half the bytes
  EXPECT_EQ(fp8.wireBytes(1008), 1024u);
  EXPECT_EQ(fp8.wireBytes(1009), 1024u + 17u);  // a second frame: header and one value
  EXPECT_LE(fp8.frameBytes(fp8.frameElems()), WireCodec::kMaxFrameBytes);
}

// Encoding what was decoded gives the same bytes: a forwarded frame and a
// rounded-in-place sum stay what every rank decodes. Non-finite values: NaN
// stays NaN; bf16 keeps infinities, fp8 (which has none) sends them as NaN.
TEST(WireCodec, RoundTripIsStableAndNonFiniteValuesSurvive) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> value(-1e4f, 1e4f);
  for (WireFormat f : {WireFormat::Bf16, WireFormat::Fp8}) {
    const WireCodec codec(f);
    const size_t n = codec.frameElems();
    std::vector<float> in(n), once(n), twice(n);
    for (float& v : in) v = value(gen);
    in[1] = 0;
    in[2] = 1e-30f;
    std::vector<std::byte> a(codec.frameBytes(n)), b(codec.frameBytes(n));
    codec.encode(in.data(), n, a.data());
    codec.decode(a.data(), n, nullptr, once.data());
    codec.encode(once.data(), n, b.data());
    codec.decode(b.data(), n, nullptr, twice.data());
    EXPECT_EQ(0, std::memcmp(once.data(), twice.data(), n * sizeof(float))) << wireFormatName(f);
    EXPECT_EQ(once[1], 0.0f);

    std::vector<float> odd = {1.0f, std::nanf(""), INFINITY, -2.0f};
    std::vector<float> back(odd.size());
    std::vector<std::byte> w(codec.frameBytes(odd.size()));
    codec.encode(odd.data(), odd.size(), w.data());
    codec.decode(w.data(), odd.size(), nullptr, back.data());
    EXPECT_TRUE(std::isnan(back[1])) << wireFormatName(f);
    if (f == WireFormat::Bf16)
      EXPECT_EQ(back[2], INFINITY);
    else
      EXPECT_TRUE(std::isnan(back[2]));
    EXPECT_EQ(back[3], -2.0f) << wireFormatName(f);  // the frame's largest: exact
  }
}

struct WireCase {
  CollType coll;
  WireFormat wire;
  int nranks;
  size_t count;
  bool inPlace;
};

std::string caseName(const ::testing::TestParamInfo<WireCase>& info) {
  const WireCase& c = info.param;
  return std::string(c.coll == CollType::AllReduce ? "AllReduce" : "ReduceScatter") + "_" +
         wireFormatName(c.wire) + "_" + std::to_string(c.nranks) + "ranks_" +
         std::to_string(c.count) + (c.inPlace ? "_inplace" : "");
}

class WireRing : public ::testing::TestWithParam<WireCase> {};

// Runs the ring with the wire format over loopback connections whose rings
// are small (4 KiB: fp8's 1 KiB frames split at the wrap), and checks every
// element against the exact sum within the bound, and, for an all-reduce,
// that every rank holds the same bits.
TEST_P(WireRing, BitIdenticalAndWithinTheBound) {
  const WireCase c = GetParam();
  const int n = c.nranks;
  // Elements of rank r's input and output.
  const size_t inElems = c.coll == CollType::ReduceScatter ? c.count * size_t(n) : c.count;
  const size_t outElems = c.count;
  std::mt19937 gen(static_cast<unsigned>(n * 131 + c.count));
  // Mixed magnitudes and signs, so partial sums cancel and frames span decades.
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-6, 6);
  std::vector<std::vector<float>> in(n, std::vector<float>(inElems));
  for (auto& v : in)
    for (float& x : v) x = std::ldexp(mant(gen), expo(gen));
  std::vector<std::vector<float>> send = in, out(n);
  for (int r = 0; r < n; ++r) out[r].assign(c.inPlace ? inElems : outElems, -7.0f);

  LoopbackMesh mesh(n, 2, 4096);
  std::vector<Status> results(n);
  std::atomic<bool> failed{false};
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        CollArgs a;
        a.coll = c.coll;
        a.count = c.count;
        a.type = lanesFloat32;
        a.redop = RedOpKind::Sum;
        a.rank = r;
        a.nranks = n;
        a.send = send[r].data();
        if (c.inPlace) {
          out[r] = send[r];
          a.send = out[r].data();
          a.recv = c.coll == CollType::ReduceScatter ? out[r].data() + size_t(r) * c.count
                                                     : out[r].data();
        } else {
          a.recv = out[r].data();
        }
        ScratchPool pool;
        Schedule sched(pool);
        Status st = buildSchedule(AlgoId::Ring, a, &sched);
        sched.wire = c.wire;
        if (st) {
          ExecContext ctx;
          ctx.rank = r;
          ctx.deadline = Deadline::after(60);
          ctx.opLabel = "wire test";
          ctx.checkAbort = [&] {
            return failed.load() ? remoteError("another rank failed") : Status::ok();
          };
          ConnectionTable table = mesh.table(r);
          LaneSchedule ls{&sched, 1};
          st = runSchedules(std::span<const LaneSchedule>(&ls, 1), table, ctx);
        }
        if (!st) failed = true;
        results[r] = std::move(st);
      });
    }
    for (std::thread& t : threads) t.join();
  }
  for (int r = 0; r < n; ++r) ASSERT_TRUE(results[r].isOk()) << results[r].message();

  const Rounding rounding = roundingOf(c.wire);
  // n - 1 partial sums and the final one each rounded once, every rounding
  // within unit x |value| (+ the fp8 floor x the frame's largest magnitude),
  // every value at most the sum of magnitudes: docs/wire_formats.md.
  const double roundings = n;
  for (int r = 0; r < n; ++r) {
    const float* got =
        out[r].data() + (c.inPlace && c.coll == CollType::ReduceScatter ? size_t(r) * c.count : 0);
    const size_t base = c.coll == CollType::ReduceScatter ? size_t(r) * c.count : 0;
    // The frame's largest sum of magnitudes bounds every partial sum in it.
    double frameMost = 0;
    for (size_t i = 0; i < outElems; ++i) {
      double mag = 0;
      for (int s = 0; s < n; ++s) mag += std::fabs(double(in[s][base + i]));
      frameMost = std::max(frameMost, mag);
    }
    for (size_t i = 0; i < outElems; ++i) {
      double exact = 0, mag = 0;
      for (int s = 0; s < n; ++s) {
        exact += in[s][base + i];
        mag += std::fabs(double(in[s][base + i]));
      }
      const double bound =
          1.01 * roundings * (rounding.unit * mag + rounding.floor * frameMost) + 1e-6 * mag;
      ASSERT_LE(std::fabs(double(got[i]) - exact), bound)
          << "rank " << r << " element " << i << ": got " << got[i] << ", exact " << exact;
    }
    if (c.coll == CollType::AllReduce && r > 0 && outElems > 0) {
      ASSERT_EQ(0, std::memcmp(out[0].data(), out[r].data(), outElems * sizeof(float)))
          << "rank " << r << " differs from rank 0";
    }
  }
}

std::vector<WireCase> wireCases() {
  std::vector<WireCase> out;
  for (CollType coll : {CollType::AllReduce, CollType::ReduceScatter})
    for (WireFormat wire : {WireFormat::Bf16, WireFormat::Fp8})
      for (int n : {1, 2, 3, 5, 8})
        for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1009}, size_t{5003}})
          for (bool inPlace : {false, true}) out.push_back({coll, wire, n, count, inPlace});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Formats, WireRing, ::testing::ValuesIn(wireCases()), caseName);

}  // namespace
}  // namespace lanes
