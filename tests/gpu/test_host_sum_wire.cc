// Host summation with a compressed wire (LANES_WIRE=bf16|fp8; docs/wire_formats.md,
// "Host summation"): the GPU codec (kernels/cuda/wire_codec.h) against the CPU
// one byte for byte, then float32 all-reduces and reduce-scatters forced onto
// host summation, ranks sharing GPU 0 as threads (2, 3, 8) and processes (2, 4).
// Each result must have exactly the bits of the wire's procedure done on the
// CPU (every rank's frames decoded and added in rank order, the sum encoded
// once and decoded), which also means every rank holds the same bits; it must
// stay within the documented bound of the exact sum; and calls the wire does
// not apply to (max, integers) must stay exact. Skipped when no GPU is visible.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/comm.h"
#include "exec/cuda/staged_collectives.h"
#include "kernels/cpu/wire_codec.h"
#include "kernels/cuda/wire_codec.h"
#include "tests/common/scoped_env.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/gpu/host_sum_env.h"

namespace lanes::test {
namespace {

// Frames as WireCodec lays them out: frame k at k x kMaxFrameBytes.
std::vector<std::byte> encodeAll(const WireCodec& codec, const float* values, size_t count) {
  std::vector<std::byte> wire(codec.wireBytes(count));
  const size_t frame = codec.frameElems();
  for (size_t i = 0; i < count; i += frame)
    codec.encode(values + i, std::min(frame, count - i),
                 wire.data() + i / frame * WireCodec::kMaxFrameBytes);
  return wire;
}

std::vector<float> decodeAll(const WireCodec& codec, const std::byte* wire, size_t count) {
  std::vector<float> out(count);
  const size_t frame = codec.frameElems();
  for (size_t i = 0; i < count; i += frame)
    codec.decode(wire + i / frame * WireCodec::kMaxFrameBytes, std::min(frame, count - i), nullptr,
                 out.data() + i);
  return out;
}

// Values over twelve binary orders of magnitude and both signs; with
// `specials`, also zeros, subnormals, the extremes, infinities and NaNs, and
// whole frames of zeros and of non-finite values only.
std::vector<float> valuesOf(size_t count, uint32_t seed, bool specials) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> mant(-1, 1);
  std::uniform_int_distribution<int> exp(-6, 6);
  std::vector<float> v(count);
  for (float& x : v) x = std::ldexp(mant(gen), exp(gen));
  if (!specials) return v;
  const float odd[] = {0.0f,
                       -0.0f,
                       std::numeric_limits<float>::denorm_min(),
                       -1e-40f,
                       std::numeric_limits<float>::max(),
                       -std::numeric_limits<float>::max(),
                       std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity(),
                       std::numeric_limits<float>::quiet_NaN(),
                       1e-30f,
                       3e38f};
  for (size_t i = 0; i < count; i += 97) v[i] = odd[(i / 97) % std::size(odd)];
  for (size_t i = 2048; i < std::min<size_t>(count, 2048 + 1008); ++i) v[i] = 0;
  for (size_t i = 4096; i < std::min<size_t>(count, 4096 + 1008); ++i)
    v[i] = i % 2 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  return v;
}

bool sameBits(const void* a, const void* b, size_t bytes) { return std::memcmp(a, b, bytes) == 0; }

// The GPU's frames are the CPU's, byte for byte, and decode to the same bits.
TEST(WireCodecGpu, EncodesAndDecodesAsTheCpuCodec) {
  GPU_SKIP_UNLESS_GPU_HERE();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  for (WireFormat format : {WireFormat::Bf16, WireFormat::Fp8}) {
    const WireCodec codec(format);
    for (size_t count : {size_t{1}, size_t{511}, size_t{512}, size_t{1008}, size_t{1009},
                         size_t{3 * 1008 + 17}, (size_t{1} << 20) + 3}) {
      const std::vector<float> values = valuesOf(count, static_cast<uint32_t>(count), true);
      const std::vector<std::byte> cpu = encodeAll(codec, values.data(), count);
      float* src = nullptr;
      float* back = nullptr;
      std::byte* wire = nullptr;
      ASSERT_EQ(cudaMalloc(&src, count * sizeof(float)), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&back, count * sizeof(float)), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&wire, cpu.size()), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(src, values.data(), count * sizeof(float), cudaMemcpyHostToDevice),
                cudaSuccess);
      ASSERT_EQ(cuda::launchWireEncode(format, src, count, wire, stream), 0);
      std::vector<std::byte> gpu(cpu.size());
      ASSERT_EQ(cudaMemcpyAsync(gpu.data(), wire, gpu.size(), cudaMemcpyDeviceToHost, stream),
                cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      size_t bad = 0;
      while (bad < gpu.size() && gpu[bad] == cpu[bad]) ++bad;
      EXPECT_EQ(bad, gpu.size()) << wireFormatName(format) << " count " << count
                                 << ": the GPU's frames differ from the CPU's at byte " << bad;
      // Decoding the CPU's frames on the GPU.
      ASSERT_EQ(cudaMemcpy(wire, cpu.data(), cpu.size(), cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cuda::launchWireDecode(format, wire, count, back, stream), 0);
      std::vector<float> decoded(count);
      ASSERT_EQ(cudaMemcpyAsync(decoded.data(), back, count * sizeof(float), cudaMemcpyDeviceToHost,
                                stream),
                cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      const std::vector<float> want = decodeAll(codec, cpu.data(), count);
      size_t badValue = 0;
      while (badValue < count && sameBits(&decoded[badValue], &want[badValue], sizeof(float)))
        ++badValue;
      EXPECT_EQ(badValue, count) << wireFormatName(format) << " count " << count
                                 << ": the GPU decodes value " << badValue << " differently";
      cudaFree(src);
      cudaFree(back);
      cudaFree(wire);
    }
  }
  EXPECT_NE(cuda::launchWireEncode(WireFormat::Native, nullptr, 4, nullptr, stream), 0)
      << "the native format has no frames";
  cudaStreamDestroy(stream);
}

struct OpCase {
  lanesRedOp_t op;
  RedOpKind kind;
};

// Rank r's input of one call.
std::vector<float> inputOf(int rank, size_t count, uint32_t call) {
  return valuesOf(count, call * 131u + static_cast<uint32_t>(rank), false);
}

// What the wire computes for `count` elements at `at` of every rank's input,
// frames counted from `at` (a chunk, a segment and a reduce-scatter block
// all start at a frame of it).
std::vector<float> wireReference(const WireCodec& codec, const std::vector<std::vector<float>>& in,
                                 size_t at, size_t count, RedOpKind op) {
  const size_t frame = codec.frameElems();
  const int n = static_cast<int>(in.size());
  std::vector<float> out(count), sum(frame);
  std::vector<std::byte> wire(WireCodec::kMaxFrameBytes);
  for (size_t i = 0; i < count; i += frame) {
    const size_t len = std::min(frame, count - i);
    for (int p = 0; p < n; ++p) {
      codec.encode(in[p].data() + at + i, len, wire.data());
      codec.decode(wire.data(), len, p == 0 ? nullptr : sum.data(), sum.data());
    }
    for (size_t j = 0; j < len; ++j) {
      if (op == RedOpKind::PreMulSum) sum[j] *= 0.375f;
      if (op == RedOpKind::Avg) sum[j] /= static_cast<float>(n);
    }
    codec.encode(sum.data(), len, wire.data());
    codec.decode(wire.data(), len, nullptr, out.data() + i);
  }
  return out;
}

void runCall(GpuRank& self, WireFormat format, bool scatter, size_t count, OpCase op, bool inPlace,
             uint32_t call) {
  const int n = self.nranks;
  const size_t inCount = scatter ? count * static_cast<size_t>(n) : count;
  std::vector<std::vector<float>> inputs;
  for (int p = 0; p < n; ++p) inputs.push_back(inputOf(p, inCount, call));
  const size_t bytes = inCount * sizeof(float);
  DeviceBuffer send(bytes, self.stream), recv(bytes, self.stream);
  std::byte* out = recv.data();
  const std::byte* in = send.data();
  const std::vector<float>& mine = inputs[static_cast<size_t>(self.rank)];
  if (inPlace) {
    recv.upload(mine.data(), bytes);
    in = recv.data();
    if (scatter) out = recv.data() + static_cast<size_t>(self.rank) * count * sizeof(float);
  } else {
    send.upload(mine.data(), bytes);
    recv.fill(0xa5);
  }
  lanesRedOp_t redop = op.op;
  if (op.kind == RedOpKind::PreMulSum) {
    float scalar = 0.375f;
    GPU_CHECK_LANES(lanesRedOpCreatePreMulSum(&redop, &scalar, lanesFloat32,
                                              lanesScalarHostImmediate, self.comm),
                    self.comm);
  }
  if (scatter)
    GPU_CHECK_LANES(lanesReduceScatter(in, out, count, lanesFloat32, redop, self.comm, self.stream),
                    self.comm);
  else
    GPU_CHECK_LANES(lanesAllReduce(in, out, count, lanesFloat32, redop, self.comm, self.stream),
                    self.comm);
  if (op.kind == RedOpKind::PreMulSum)
    GPU_CHECK_LANES(lanesRedOpDestroy(redop, self.comm), self.comm);
  const std::vector<std::byte> got = recv.download();
  const size_t at = scatter ? static_cast<size_t>(self.rank) * count : 0;
  const std::byte* result = got.data() + (scatter && inPlace ? at * sizeof(float) : 0);
  const char* what = scatter ? "reduce-scatter" : "all-reduce";

  if (op.kind == RedOpKind::Max) {  // the wire never applies: exact
    for (size_t i = 0; i < count; ++i) {
      float want = inputs[0][at + i];
      for (int p = 1; p < n; ++p) want = std::max(want, inputs[p][at + i]);
      GPU_CHECK(sameBits(result + i * sizeof(float), &want, sizeof(float)),
                "%s max count %zu: rank %d's element %zu is not the exact maximum", what, count,
                self.rank, i);
    }
    return;
  }
  const WireCodec codec(format);
  const std::vector<float> want = wireReference(codec, inputs, at, count, op.kind);
  const double u = format == WireFormat::Bf16 ? 0x1p-8 : 0x1p-4;
  const double floor = format == WireFormat::Bf16 ? 0 : 0x1p-10 / 448;
  const double post = op.kind == RedOpKind::PreMulSum ? 0.375
                      : op.kind == RedOpKind::Avg     ? 1.0 / n
                                                      : 1;
  double most = 0;  // M: the largest magnitude of any input or sum
  for (size_t i = 0; i < count; ++i) {
    double exact = 0;
    for (int p = 0; p < n; ++p) {
      exact += inputs[p][at + i];
      most = std::max(most, std::fabs(double(inputs[p][at + i])));
    }
    most = std::max(most, std::fabs(exact));
  }
  for (size_t i = 0; i < count; ++i) {
    float value;
    std::memcpy(&value, result + i * sizeof(float), sizeof(float));
    GPU_CHECK(
        sameBits(&value, &want[i], sizeof(float)),
        "%s %s op %d count %zu %s: rank %d's element %zu is %g, the wire's procedure gives %g",
        what, wireFormatName(format), static_cast<int>(op.kind), count,
        inPlace ? "in place" : "out of place", self.rank, i, double(value), double(want[i]));
    double exact = 0, magnitudes = 0;
    for (int p = 0; p < n; ++p) {
      exact += inputs[p][at + i];
      magnitudes += std::fabs(double(inputs[p][at + i]));
    }
    const double bound = post * ((2 * u + n * 0x1p-24) * magnitudes + (n + 1) * floor * most);
    GPU_CHECK(std::fabs(value - post * exact) <= bound,
              "%s %s count %zu: rank %d's element %zu is %g, %g from the exact sum, beyond the "
              "bound %g",
              what, wireFormatName(format), count, self.rank, i, double(value),
              std::fabs(value - post * exact), bound);
  }
}

void runMatrix(GpuRank& self, WireFormat format) {
  auto* staged = dynamic_cast<StagedCollectives*>(self.comm->devicePaths.staged.get());
  GPU_CHECK(staged != nullptr, "rank %d: the staged path is off", self.rank);
  const uint64_t before = staged->hostSumChunks();
  uint32_t call = 0;
  const OpCase ops[] = {{lanesSum, RedOpKind::Sum},
                        {lanesAvg, RedOpKind::Avg},
                        {lanesSum, RedOpKind::PreMulSum},
                        {lanesMax, RedOpKind::Max}};
  for (const OpCase& op : ops)
    for (bool scatter : {false, true}) {
      std::vector<size_t> counts = {0, 1, 37, 1009, 4097};
      if (op.kind == RedOpKind::Sum) counts.push_back(scatter ? 300007 : (size_t{3} << 19) + 3);
      for (size_t count : counts)
        for (bool inPlace : {false, true})
          runCall(self, format, scatter, count, op, inPlace, ++call);
    }
  GPU_CHECK(staged->hostSumChunks() > before,
            "rank %d: no chunk was summed on the host (LANES_DEBUG=INFO says which path ran)",
            self.rank);
}

// Forced onto host summation, the slots in host memory, with the format.
struct WireEnv : HostSumEnv {
  explicit WireEnv(WireFormat format) : wire("LANES_WIRE", wireFormatName(format)) {}
  ScopedEnv wire;
};

TEST(HostSumWire, Threads) {
  GPU_SKIP_UNLESS_GPU_HERE();
  for (WireFormat format : {WireFormat::Bf16, WireFormat::Fp8}) {
    WireEnv env(format);
    for (int n : {2, 3, 8}) {
      SCOPED_TRACE(std::string(wireFormatName(format)) + ", " + std::to_string(n) + " ranks");
      runGpuThreads(n, [format](GpuRank& self) { runMatrix(self, format); });
    }
  }
}

TEST(HostSumWire, Procs) {
  GPU_SKIP_UNLESS_GPU_FOR_FORK();
  for (WireFormat format : {WireFormat::Bf16, WireFormat::Fp8}) {
    WireEnv env(format);
    for (int n : {2, 4}) {
      SCOPED_TRACE(std::string(wireFormatName(format)) + ", " + std::to_string(n) + " ranks");
      runGpuProcesses(n, [format](GpuRank& self) { runMatrix(self, format); });
    }
  }
}

}  // namespace
}  // namespace lanes::test
