// LANES_WIRE and lanesConfig_t.wireFormat through the public API, ranks as
// processes over shared memory and over TCP: float32 sums on the ring come
// out alike on every rank and within the bound (docs/wire_formats.md), other
// types and reductions exactly as without compression, and ranks that ask
// for different formats all fall back to the native one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tests/multi/harness.h"

namespace lanes::test {
namespace {

// 1 MiB of float32 per rank: large enough that the planner picks the ring.
constexpr size_t kCount = size_t{1} << 18;

float inputOf(int rank, size_t i) {
  // Values of mixed signs over a few binary orders of magnitude, none exact in bf16.
  const float mant = 1.0f + static_cast<float>((i * 2654435761u + rank * 40503u) % 1000) / 997.0f;
  return std::ldexp((i + rank) % 3 == 0 ? -mant : mant, static_cast<int>(i % 7) - 3);
}

lanesComm_t initWithWire(int rank, int nranks, const lanesUniqueId& id, int wire) {
  lanesConfig_t config = LANES_CONFIG_INITIALIZER;
  config.timeoutSeconds = rankTimeoutSeconds();
  config.wireFormat = wire;
  lanesComm_t comm = nullptr;
  RANK_CHECK_LANES(lanesCommInitRankConfig(&comm, nranks, id, rank, &config), nullptr);
  return comm;
}

// All-reduces kCount floats; checks each element against the exact sum
// within `unit` (the format's unit roundoff; 0: exact) x nranks x the sum
// of magnitudes, and every rank's bits against rank 0's through a
// second all-reduce of the bits (max of each word: equal everywhere iff
// every rank holds the same words). Returns whether any element was rounded.
bool allReduceWithin(lanesComm_t comm, int rank, int n, double unit) {
  std::vector<float> send(kCount), recv(kCount, -1.0f);
  for (size_t i = 0; i < kCount; ++i) send[i] = inputOf(rank, i);
  RANK_CHECK_LANES(
      lanesAllReduce(send.data(), recv.data(), kCount, lanesFloat32, lanesSum, comm, nullptr),
      comm);
  bool rounded = false;
  for (size_t i = 0; i < kCount; ++i) {
    double exact = 0, magnitude = 0;
    for (int r = 0; r < n; ++r) {
      exact += inputOf(r, i);
      magnitude += std::fabs(double(inputOf(r, i)));
    }
    const double error = std::fabs(double(recv[i]) - exact);
    RANK_CHECK(error <= 1.01 * n * unit * magnitude + 1e-6 * magnitude,
               "element %zu is %.9g, exact %.9g: error %.3g over the bound", i, recv[i], exact,
               error);
    rounded = rounded || error > 1e-6 * magnitude;
  }
  std::vector<uint32_t> mine(kCount), most(kCount);
  std::memcpy(mine.data(), recv.data(), kCount * sizeof(float));
  RANK_CHECK_LANES(
      lanesAllReduce(mine.data(), most.data(), kCount, lanesUint32, lanesMax, comm, nullptr), comm);
  RANK_CHECK(std::memcmp(mine.data(), most.data(), kCount * sizeof(uint32_t)) == 0,
             "rank %d's result differs from another rank's (not bit-identical)", rank);
  return rounded;
}

// Integers and min/max move exactly whatever the wire format.
void othersExact(lanesComm_t comm, int rank, int n) {
  std::vector<int32_t> send(kCount), recv(kCount);
  for (size_t i = 0; i < kCount; ++i) send[i] = static_cast<int32_t>(i * 7 + rank);
  RANK_CHECK_LANES(
      lanesAllReduce(send.data(), recv.data(), kCount, lanesInt32, lanesSum, comm, nullptr), comm);
  for (size_t i = 0; i < kCount; ++i)
    RANK_CHECK(recv[i] == static_cast<int32_t>(i * 7 * n + n * (n - 1) / 2),
               "int32 sum element %zu is %d", i, recv[i]);
  std::vector<float> f(kCount), g(kCount);
  for (size_t i = 0; i < kCount; ++i) f[i] = inputOf(rank, i);
  RANK_CHECK_LANES(
      lanesAllReduce(f.data(), g.data(), kCount, lanesFloat32, lanesMax, comm, nullptr), comm);
  for (size_t i = 0; i < kCount; ++i) {
    float want = inputOf(0, i);
    for (int r = 1; r < n; ++r) want = std::max(want, inputOf(r, i));
    RANK_CHECK(g[i] == want, "float32 max element %zu is %g, expected %g", i, g[i], want);
  }
}

struct WireParam {
  int wire;  // lanesWireFormat_t
  double unit;
  const char* transport;  // "shm" or "tcp"
};

class WireApi : public ::testing::TestWithParam<WireParam> {};

TEST_P(WireApi, SumsRoundedAlikeOthersExact) {
  const WireParam p = GetParam();
  RunOptions options;
  options.env = {{"LANES_ALGO", "ring"}};  // the algorithm the wire applies to
  if (std::string(p.transport) == "tcp") options.env.push_back({"LANES_SHM_DISABLE", "1"});
  runForked(
      3,
      [p](int rank, int n, const lanesUniqueId& id) {
        CommGuard comm(initWithWire(rank, n, id, p.wire));
        const bool rounded = allReduceWithin(comm.get(), rank, n, p.unit);
        RANK_CHECK(rounded, "no element was rounded: the sum did not cross the wire compressed");
        othersExact(comm.get(), rank, n);
      },
      options);
}

INSTANTIATE_TEST_SUITE_P(Formats, WireApi,
                         ::testing::Values(WireParam{lanesWireBf16, std::ldexp(1.0, -8), "shm"},
                                           WireParam{lanesWireFp8, std::ldexp(1.0, -4), "shm"},
                                           WireParam{lanesWireBf16, std::ldexp(1.0, -8), "tcp"}),
                         [](const ::testing::TestParamInfo<WireParam>& info) {
                           return std::string(info.param.wire == lanesWireBf16 ? "bf16" : "fp8") +
                                  "_" + info.param.transport;
                         });

// LANES_WIRE sets it where the config leaves it to the environment; ranks
// that disagree (rank 1 says native in its config) all send uncompressed,
// so the float32 sums come out exact.
TEST(WireApi, EnvironmentAndDisagreement) {
  RunOptions options;
  options.env = {{"LANES_WIRE", "bf16"}, {"LANES_ALGO", "ring"}};
  runForked(
      2,
      [](int rank, int n, const lanesUniqueId& id) {
        CommGuard comm(initWithWire(rank, n, id, LANES_CONFIG_UNDEF_INT));
        RANK_CHECK(allReduceWithin(comm.get(), rank, n, std::ldexp(1.0, -8)),
                   "LANES_WIRE=bf16 but no element was rounded");
      },
      options);
  runForked(
      2,
      [](int rank, int n, const lanesUniqueId& id) {
        CommGuard comm(initWithWire(rank, n, id, rank == 1 ? lanesWireNative : lanesWireDefault));
        RANK_CHECK(!allReduceWithin(comm.get(), rank, n, 0),
                   "the ranks disagreed on the wire, yet a sum was rounded");
      },
      options);
}

TEST(WireApi, BadConfigValueIsRefused) {
  runForked(1, [](int rank, int n, const lanesUniqueId& id) {
    lanesConfig_t config = LANES_CONFIG_INITIALIZER;
    config.wireFormat = 7;
    lanesComm_t comm = nullptr;
    const lanesResult_t res = lanesCommInitRankConfig(&comm, n, id, rank, &config);
    RANK_CHECK(res == lanesInvalidArgument, "wireFormat 7 gave %d, expected lanesInvalidArgument",
               static_cast<int>(res));
    RANK_CHECK(std::string(lanesGetLastError(nullptr)).find("wireFormat") != std::string::npos,
               "the error does not name wireFormat: %s", lanesGetLastError(nullptr));
  });
}

}  // namespace
}  // namespace lanes::test
