// The host summation's reducer threads (exec/host_reducer.h): each job waits
// for every input's counter, sums the inputs in rank order in blocks and
// slices and raises its own counter; the result has the bits of the plain
// pairwise CPU reduction in the same order, for every type and op, any count
// and any number of threads.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "exec/host_reducer.h"
#include "kernels/cpu/reduce.h"

namespace lanes {
namespace {

using namespace std::chrono_literals;

struct Inputs {
  std::vector<std::vector<std::byte>> bufs;
  std::vector<uint32_t> ready;
};

Inputs makeInputs(int n, size_t bytes, uint32_t seed) {
  Inputs in;
  std::mt19937 gen(seed);
  in.bufs.resize(static_cast<size_t>(n));
  for (auto& b : in.bufs) {
    b.resize(bytes);
    // Small magnitudes in every type (low bytes random, high bytes of wide
    // types mostly clear), so sums stay finite and products meaningful.
    for (size_t i = 0; i < bytes; ++i)
      b[i] = static_cast<std::byte>(gen() & (i % 4 == 3 ? 0x3c : 0xff));
  }
  in.ready.assign(static_cast<size_t>(n), 0);
  return in;
}

// The plain pairwise reduction over whole buffers, in rank order.
std::vector<std::byte> reference(const Inputs& in, size_t count, lanesDataType_t type, RedOpKind op,
                                 double scalar) {
  const size_t bytes = count * datatypeSize(type);
  std::vector<std::byte> out(bytes), tmp(bytes);
  const size_t n = in.bufs.size();
  if (op == RedOpKind::PreMulSum) {
    cpu::premultiply(out.data(), in.bufs[0].data(), count, type, scalar);
    for (size_t k = 1; k < n; ++k) {
      cpu::premultiply(tmp.data(), in.bufs[k].data(), count, type, scalar);
      cpu::reduce(out.data(), out.data(), tmp.data(), count, type, op);
    }
  } else {
    std::memcpy(out.data(), in.bufs[0].data(), bytes);
    for (size_t k = 1; k < n; ++k)
      cpu::reduce(out.data(), out.data(), in.bufs[k].data(), count, type, op);
  }
  if (op == RedOpKind::Avg) cpu::finishAvg(out.data(), count, type, static_cast<int>(n));
  return out;
}

HostReducer::Job jobFor(Inputs& in, std::vector<std::byte>* out, uint32_t g, size_t count,
                        lanesDataType_t type, RedOpKind op, double scalar,
                        volatile uint32_t* done) {
  HostReducer::Job job;
  job.g = g;
  for (size_t p = 0; p < in.bufs.size(); ++p) {
    job.ready.push_back(&in.ready[p]);
    job.srcs.push_back(in.bufs[p].data());
  }
  job.dst = out->data();
  job.count = count;
  job.type = type;
  job.op = op;
  job.scalar = scalar;
  job.avgRanks = op == RedOpKind::Avg ? static_cast<int>(in.bufs.size()) : 0;
  job.done = done;
  return job;
}

bool waitFor(const volatile uint32_t* counter, uint32_t value) {
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (!HostReducer::reached(__atomic_load_n(counter, __ATOMIC_ACQUIRE), value)) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(100us);
  }
  return true;
}

TEST(HostReducer, SumsEveryTypeAndOpInRankOrderWithTheBitsOfThePairwiseReduction) {
  HostReducer reducer(3, std::nullopt);
  uint32_t done = 0;
  uint32_t g = 0;
  for (int t = 0; t < lanesNumTypes; ++t) {
    const auto type = static_cast<lanesDataType_t>(t);
    for (RedOpKind op : {RedOpKind::Sum, RedOpKind::Prod, RedOpKind::Max, RedOpKind::Min,
                         RedOpKind::Avg, RedOpKind::PreMulSum}) {
      for (int n : {1, 2, 3, 8}) {
        // Odd sizes, one element, more than a block (32 KiB) per slice.
        for (size_t count : {size_t{1}, size_t{37}, size_t{100003}}) {
          Inputs in = makeInputs(n, count * datatypeSize(type), static_cast<uint32_t>(g));
          std::vector<std::byte> out(count * datatypeSize(type));
          ++g;
          reducer.push(jobFor(in, &out, g, count, type, op, 0.375, &done));
          for (uint32_t& r : in.ready) __atomic_store_n(&r, g, __ATOMIC_RELEASE);
          ASSERT_TRUE(waitFor(&done, g));
          EXPECT_EQ(out, reference(in, count, type, op, 0.375))
              << "type " << t << " op " << redOpName(op) << " ranks " << n << " count " << count;
        }
      }
    }
  }
  EXPECT_EQ(reducer.finished(), g);
}

TEST(HostReducer, WaitsForEveryInputAndFinishesJobsInOrder) {
  HostReducer reducer(2, std::nullopt);
  Inputs in = makeInputs(3, 4096 * sizeof(float), 7);
  std::vector<std::byte> first(4096 * sizeof(float)), second(first.size());
  uint32_t done = 0;
  reducer.push(jobFor(in, &first, 1, 4096, lanesFloat32, RedOpKind::Sum, 1, &done));
  reducer.push(jobFor(in, &second, 2, 4096, lanesFloat32, RedOpKind::Max, 1, &done));
  __atomic_store_n(&in.ready[0], 2, __ATOMIC_RELEASE);
  __atomic_store_n(&in.ready[2], 2, __ATOMIC_RELEASE);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(__atomic_load_n(&done, __ATOMIC_ACQUIRE), 0u) << "summed before rank 1's input";
  EXPECT_EQ(reducer.finished(), 0u);
  __atomic_store_n(&in.ready[1], 2, __ATOMIC_RELEASE);
  ASSERT_TRUE(waitFor(&done, 2));
  EXPECT_EQ(reducer.finished(), 2u);
  EXPECT_EQ(first, reference(in, 4096, lanesFloat32, RedOpKind::Sum, 1));
  EXPECT_EQ(second, reference(in, 4096, lanesFloat32, RedOpKind::Max, 1));
}

TEST(HostReducer, AnEmptyJobRaisesItsCounter) {
  HostReducer reducer(4, std::nullopt);
  Inputs in = makeInputs(2, 0, 1);
  std::vector<std::byte> out;
  uint32_t done = 0;
  reducer.push(jobFor(in, &out, 5, 0, lanesInt32, RedOpKind::Sum, 1, &done));
  for (uint32_t& r : in.ready) r = 5;
  ASSERT_TRUE(waitFor(&done, 5));
}

// Counters compare modulo 2^32, as the streams' waits do; a wait passes for
// any value at or ahead of it (the watchdog's poison is far ahead).
TEST(HostReducer, CountersCompareAcrossTheWrap) {
  EXPECT_TRUE(HostReducer::reached(5, 5));
  EXPECT_TRUE(HostReducer::reached(3, 0xfffffffeu));
  EXPECT_FALSE(HostReducer::reached(0xfffffffeu, 3));
  EXPECT_FALSE(HostReducer::reached(4, 5));
  EXPECT_TRUE(HostReducer::reached(5 + (1u << 30), 5));
}

// Destruction does not wait for inputs that never come (a failed
// communicator's streams were given up on first).
TEST(HostReducer, StopsAtOnceWithAJobWhoseInputsNeverArrive) {
  Inputs in = makeInputs(2, 64, 3);
  std::vector<std::byte> out(64);
  uint32_t done = 0;
  const auto start = std::chrono::steady_clock::now();
  {
    HostReducer reducer(2, std::nullopt);
    reducer.push(jobFor(in, &out, 1, 16, lanesFloat32, RedOpKind::Sum, 1, &done));
    std::this_thread::sleep_for(20ms);  // the threads are in the wait's sleeping phase
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_EQ(done, 0u);
}

// With a wire format the inputs and the result are frames: the reducer
// decodes every input's frames in rank order, adds them in float32, applies
// the pre-multiplication or the average, and encodes the sum once. Its
// result has the bits of that done frame by frame with WireCodec, and stays
// within the bound of docs/wire_formats.md ("Host summation") of the exact sum.
TEST(HostReducer, SumsWireFramesInFloat32AndEncodesTheSumOnce) {
  HostReducer reducer(3, std::nullopt);
  uint32_t done = 0;
  uint32_t g = 0;
  for (WireFormat format : {WireFormat::Bf16, WireFormat::Fp8}) {
    const WireCodec codec(format);
    const size_t frame = codec.frameElems();
    for (RedOpKind op : {RedOpKind::Sum, RedOpKind::Avg, RedOpKind::PreMulSum}) {
      for (int n : {1, 2, 3, 8}) {
        for (size_t count : {size_t{1}, size_t{37}, 3 * frame + 5, size_t{100003}}) {
          ++g;
          std::mt19937 gen(g);
          // Magnitudes over twelve binary orders, both signs.
          std::uniform_real_distribution<float> mant(-1, 1);
          std::uniform_int_distribution<int> exp(-6, 6);
          std::vector<std::vector<float>> values(static_cast<size_t>(n), std::vector<float>(count));
          Inputs in;
          in.ready.assign(static_cast<size_t>(n), 0);
          for (auto& v : values) {
            for (float& x : v) x = std::ldexp(mant(gen), exp(gen));
            std::vector<std::byte> wire(codec.wireBytes(count));
            for (size_t i = 0; i < count; i += frame)
              codec.encode(v.data() + i, std::min(frame, count - i),
                           wire.data() + i / frame * WireCodec::kMaxFrameBytes);
            in.bufs.push_back(std::move(wire));
          }
          std::vector<std::byte> out(codec.wireBytes(count));
          HostReducer::Job job = jobFor(in, &out, g, count, lanesFloat32, op, 0.375, &done);
          job.wire = format;
          reducer.push(std::move(job));
          for (uint32_t& r : in.ready) __atomic_store_n(&r, g, __ATOMIC_RELEASE);
          ASSERT_TRUE(waitFor(&done, g));

          std::vector<float> sum(count), got(count);
          std::vector<std::byte> want(out.size());
          for (size_t i = 0; i < count; i += frame) {
            const size_t len = std::min(frame, count - i);
            const size_t at = i / frame * WireCodec::kMaxFrameBytes;
            for (int k = 0; k < n; ++k)
              codec.decode(in.bufs[k].data() + at, len, k == 0 ? nullptr : sum.data() + i,
                           sum.data() + i);
            for (size_t j = i; j < i + len; ++j) {
              if (op == RedOpKind::PreMulSum) sum[j] *= 0.375f;
              if (op == RedOpKind::Avg) sum[j] /= static_cast<float>(n);
            }
            codec.encode(sum.data() + i, len, want.data() + at);
            codec.decode(out.data() + at, len, nullptr, got.data() + i);
          }
          ASSERT_EQ(out, want) << wireFormatName(format) << " op " << redOpName(op) << " ranks "
                               << n << " count " << count;
          // Two roundings to the format (each input, the sum), the float32 adds.
          const double u = format == WireFormat::Bf16 ? 0x1p-8 : 0x1p-4;
          const double floor = format == WireFormat::Bf16 ? 0 : 0x1p-10 / 448;
          const double post = op == RedOpKind::PreMulSum ? 0.375
                              : op == RedOpKind::Avg     ? 1.0 / n
                                                         : 1;
          // M: the largest magnitude of any input or sum (each frame's scale is
          // at most that).
          double most = 0;
          for (size_t j = 0; j < count; ++j) {
            double exact = 0;
            for (const auto& v : values)
              exact += v[j], most = std::max(most, std::fabs(double(v[j])));
            most = std::max(most, std::fabs(exact));
          }
          for (size_t j = 0; j < count; ++j) {
            double exact = 0, magnitudes = 0;
            for (const auto& v : values) exact += v[j], magnitudes += std::fabs(double(v[j]));
            const double bound =
                post * ((2 * u + n * 0x1p-24) * magnitudes + (n + 1) * floor * most);
            ASSERT_LE(std::fabs(got[j] - post * exact), bound)
                << wireFormatName(format) << " op " << redOpName(op) << " ranks " << n
                << " element " << j;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace lanes
