// Probe results in JSON and in the probe cache: the per-GPU device figures
// (copy rate by size, stream flag and launch latency) round-trip, and entries
// written before they existed still load, without them.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "fixture_util.h"
#include "topology/probe.h"
#include "topology/report.h"

namespace lanes::topo::testing {
namespace {

GpuProbe measuredGpu(int gpu) {
  GpuProbe g;
  g.gpu = gpu;
  g.h2d = 24.5;
  g.d2h = 26;
  g.bidir = 40.25;
  for (int i = 0; i < HostProbe::kCurvePoints; ++i) {
    g.h2dCurve.push_back(0.75 + 3 * i);
    g.d2hCurve.push_back(0.5 + 3.25 * i);
    g.d2dCurve.push_back(1.5 + 100 * i);
  }
  g.flagUs = 2.125;
  g.launchUs = 2.5;
  return g;
}

void expectSameGpu(const GpuProbe& got, const GpuProbe& want) {
  EXPECT_EQ(got.gpu, want.gpu);
  EXPECT_EQ(got.h2d, want.h2d);
  EXPECT_EQ(got.d2h, want.d2h);
  EXPECT_EQ(got.bidir, want.bidir);
  EXPECT_EQ(got.h2dCurve, want.h2dCurve);
  EXPECT_EQ(got.d2hCurve, want.d2hCurve);
  EXPECT_EQ(got.d2dCurve, want.d2dCurve);
  EXPECT_EQ(got.flagUs, want.flagUs);
  EXPECT_EQ(got.launchUs, want.launchUs);
}

// A cache file in the test's temporary directory, removed after.
struct CacheFile {
  std::string path =
      ::testing::TempDir() + "/lanes_probe_cache_" + std::to_string(getpid()) + ".json";
  ~CacheFile() { std::remove(path.c_str()); }
};

TEST(TopoProbeJson, DeviceFiguresRoundTrip) {
  Probes p;
  p.gpus.push_back(measuredGpu(0));
  p.gpus.push_back(measuredGpu(1));
  p.gpus[1].flagUs = 3.75;
  Json j;
  std::string error;
  ASSERT_TRUE(Json::parse(probesToJson(p).dump(), &j, &error)) << error;
  const Json& first = j["gpus"].items().at(0);
  EXPECT_EQ(first["h2d_gbps_by_size"].items().size(), size_t{HostProbe::kCurvePoints});
  EXPECT_EQ(first["d2h_gbps_by_size"].items().size(), size_t{HostProbe::kCurvePoints});
  EXPECT_EQ(first["flag_us"].num(), 2.125);
  EXPECT_EQ(first["launch_us"].num(), 2.5);
  const Probes back = probesFromJson(j);
  ASSERT_EQ(back.gpus.size(), 2u);
  expectSameGpu(back.gpus[0], p.gpus[0]);
  expectSameGpu(back.gpus[1], p.gpus[1]);
  EXPECT_TRUE(back.gpus[0].curvesMeasured());
  EXPECT_TRUE(back.gpus[0].latenciesMeasured());
}

// The host path's figures, TCP over loopback included, round-trip and show in
// the report; without TCP figures the keys are left out.
TEST(TopoProbeJson, HostFiguresWithTcpRoundTripAndShowInTheReport) {
  Probes p;
  HostProbe& h = p.host;
  h.hopLatencyUs = 0.75;
  h.stepUs = 0.25;
  h.callUs = 0.5;
  h.rootedUs = 1.25;
  h.memGBs = 18;
  h.exchangeGBs = 6;
  for (int i = 0; i < HostProbe::kCurvePoints; ++i) {
    h.hopGBs.push_back(4 + i);
    h.reduceGBs.push_back(10 + i);
  }
  Json j;
  std::string error;
  // A cache from before the rooted probe: no key, read back as unmeasured, not shown.
  h.rootedUs = 0;
  ASSERT_TRUE(Json::parse(probesToJson(p).dump(), &j, &error)) << error;
  EXPECT_TRUE(j["host"]["rooted_us"].isNull());
  Topology before;
  before.probes = probesFromJson(j);
  EXPECT_EQ(before.probes.host.rootedUs, 0);
  EXPECT_EQ(formatReport(before).find("rooted call"), std::string::npos);
  EXPECT_TRUE(j["host"]["sum_us"].isNull()) << "no host-summation loop: no key";
  EXPECT_EQ(before.probes.host.sumUs, 0);
  EXPECT_EQ(formatReport(before).find("host summation"), std::string::npos);
  h.rootedUs = 1.25;
  h.sumUs = 2.5;
  ASSERT_TRUE(Json::parse(probesToJson(p).dump(), &j, &error)) << error;
  EXPECT_TRUE(j["host"]["tcp_gbps"].isNull());
  h.tcpLatencyUs = 11.5;
  h.tcpGBs = 2.25;
  ASSERT_TRUE(Json::parse(probesToJson(p).dump(), &j, &error)) << error;
  const Probes back = probesFromJson(j);
  EXPECT_TRUE(back.host.measured());
  EXPECT_EQ(back.host.tcpLatencyUs, 11.5);
  EXPECT_EQ(back.host.tcpGBs, 2.25);
  EXPECT_EQ(back.host.stepUs, 0.25);
  EXPECT_EQ(back.host.rootedUs, 1.25);
  EXPECT_EQ(back.host.sumUs, 2.5);
  Topology t;
  t.probes = back;
  const std::string report = formatReport(t);
  EXPECT_NE(report.find(
                "  host path: hop 0.75 us, later step 0.25 us, call 0.50 us, rooted call 1.25 us, "
                "host summation call 2.50 us, 1 MiB hop 8.0 "
                "GB/s, reduce 14.0 "
                "GB/s; memory 18.0 GB/s, two hops at once 6.0 GB/s each\n"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("TCP over loopback (the stack's share of a hop between hosts): 11.5 us, "
                        "2.25 GB/s"),
            std::string::npos)
      << report;
  EXPECT_EQ(report.find("wire codec"), std::string::npos) << "not measured, not shown";
}

// The wire codec's figures round-trip and show; files without them (older
// caches) read as not measured.
TEST(TopoProbeJson, WireCodecFiguresRoundTripAndShowInTheReport) {
  Probes p;
  HostProbe& h = p.host;
  h.hopLatencyUs = h.callUs = 1;
  h.memGBs = h.exchangeGBs = 5;
  h.hopGBs.assign(HostProbe::kCurvePoints, 4);
  h.reduceGBs.assign(HostProbe::kCurvePoints, 8);
  Json j;
  std::string error;
  ASSERT_TRUE(Json::parse(probesToJson(p).dump(), &j, &error)) << error;
  EXPECT_TRUE(j["host"]["wire_ns_per_value"].isNull());
  EXPECT_EQ(probesFromJson(j).host.wireEncodeNs[1], 0);
  h.wireEncodeNs[0] = 0.125;
  h.wireDecodeNs[0] = 0.25;
  h.wireEncodeNs[1] = 1.5;
  h.wireDecodeNs[1] = 0.375;
  ASSERT_TRUE(Json::parse(probesToJson(p).dump(), &j, &error)) << error;
  const Probes back = probesFromJson(j);
  EXPECT_EQ(back.host.wireEncodeNs[0], 0.125);
  EXPECT_EQ(back.host.wireDecodeNs[0], 0.25);
  EXPECT_EQ(back.host.wireEncodeNs[1], 1.5);
  EXPECT_EQ(back.host.wireDecodeNs[1], 0.375);
  Topology t;
  t.probes = back;
  const std::string report = formatReport(t);
  EXPECT_NE(report.find("wire codec on one core (LANES_WIRE): bf16 encode 0.12, decode and add "
                        "0.25 ns a value; fp8 encode 1.50, decode and add 0.38 ns a value"),
            std::string::npos)
      << report;
}

TEST(TopoProbeJson, DeviceFiguresRoundTripThroughTheCacheAndShowInTheReport) {
  Topology t = loadFixture("consumer_2x4090_x8x8.json");
  ASSERT_GE(t.gpus.size(), 2u);
  t.probes = Probes{};
  t.probes.gpus = {measuredGpu(0), measuredGpu(1)};
  CacheFile cache;
  ASSERT_TRUE(saveCachedProbes(cache.path, t).isOk());
  Topology again = t;
  again.probes = Probes{};
  ASSERT_TRUE(loadCachedProbes(cache.path, &again));
  ASSERT_EQ(again.probes.gpus.size(), 2u);
  expectSameGpu(again.probes.gpus[1], t.probes.gpus[1]);
  const std::string report = formatReport(again);
  EXPECT_NE(report.find("    copies 4 KiB..64 MiB H2D: 0.75 3.75 6.75 "), std::string::npos)
      << report;
  EXPECT_NE(report.find("    copies 4 KiB..64 MiB D2H: 0.5 3.75 7 "), std::string::npos) << report;
  EXPECT_NE(report.find("    stream flag 2.12 us one way, kernel launch 2.50 us\n"),
            std::string::npos)
      << report;
}

// Figures measured at first use say so, and the size of their copies, in the
// cache and in the report; a later lanes-topo --probe's entry says its own.
TEST(TopoProbeJson, WhoMeasuredRoundTripsAndShowsInTheReport) {
  Topology t = loadFixture("consumer_2x4090_x8x8.json");
  t.probes = Probes{};
  t.probes.gpus = {measuredGpu(1)};
  t.probes.measuredBy = Probes::kAtFirstUse;
  t.probes.copyBytes = size_t{64} << 20;
  CacheFile cache;
  ASSERT_TRUE(saveCachedProbes(cache.path, t).isOk());
  Topology again = t;
  again.probes = Probes{};
  ASSERT_TRUE(loadCachedProbes(cache.path, &again));
  EXPECT_EQ(again.probes.measuredBy, Probes::kAtFirstUse);
  EXPECT_EQ(again.probes.copyBytes, size_t{64} << 20);
  std::string report = formatReport(again);
  EXPECT_NE(report.find("Probes (measured at first use: the first communicator's GPU, no P2P "
                        "pairs; lanes-topo --probe measures all; GPU copies from pinned host "
                        "memory, best of several 64 MiB copies):"),
            std::string::npos)
      << report;

  t.probes.measuredBy = Probes::kByTool;
  t.probes.copyBytes = size_t{256} << 20;
  ASSERT_TRUE(saveCachedProbes(cache.path, t).isOk());
  ASSERT_TRUE(loadCachedProbes(cache.path, &again));
  EXPECT_EQ(again.probes.measuredBy, Probes::kByTool);
  report = formatReport(again);
  EXPECT_NE(report.find("Probes (lanes-topo --probe; GPU copies from pinned host memory, best of "
                        "several 256 MiB copies):"),
            std::string::npos)
      << report;
}

// As lanes-topo wrote GPU probes before the copy curves and latencies.
const char kOldEntry[] = R"({
  "gpus": [{"gpu": 0, "h2d_gbps": 24.5, "d2h_gbps": 26, "bidir_gbps": 40.25},
           {"gpu": 1, "h2d_gbps": 12.25, "d2h_gbps": 13, "bidir_gbps": 20}],
  "pairs": [], "all_h2d_gbps": 30, "all_d2h_gbps": 31,
  "host": {"hop_latency_us": 1.5, "call_us": 0.5, "hop_gbps_by_size": [1, 2, 3, 4, 5, 6, 7, 8],
           "reduce_gbps_by_size": [8, 7, 6, 5, 4, 3, 2, 1], "mem_gbps": 20,
           "exchange_gbps": 9}
})";

void expectOldEntry(const Probes& p) {
  ASSERT_EQ(p.gpus.size(), 2u);
  for (const GpuProbe& g : p.gpus) {
    EXPECT_TRUE(g.h2dCurve.empty());
    EXPECT_TRUE(g.d2hCurve.empty());
    EXPECT_EQ(g.flagUs, 0);
    EXPECT_EQ(g.launchUs, 0);
    EXPECT_FALSE(g.curvesMeasured());
    EXPECT_FALSE(g.latenciesMeasured());
  }
  EXPECT_EQ(p.gpus[1].h2d, 12.25);
  EXPECT_EQ(p.allD2h, 31);
  EXPECT_TRUE(p.host.measured());
}

TEST(TopoProbeJson, OldEntriesLoadWithoutTheDeviceFigures) {
  Json j;
  std::string error;
  ASSERT_TRUE(Json::parse(kOldEntry, &j, &error)) << error;
  const Probes p = probesFromJson(j);
  expectOldEntry(p);
  // Written back, the entry stays as it was: nothing measured is added.
  EXPECT_FALSE(probesToJson(p)["gpus"].items().at(0).has("flag_us"));
  EXPECT_FALSE(probesToJson(p)["gpus"].items().at(0).has("h2d_gbps_by_size"));

  Topology t = loadFixture("consumer_2x4090_x8x8.json");
  t.probes = Probes{};
  CacheFile cache;
  ASSERT_TRUE(writeTextFile(cache.path, std::string(R"({"format": "lanes-topo-cache-1", )") +
                                            R"("entries": {")" + topologyHash(t) +
                                            "\": " + kOldEntry + "}}\n")
                  .isOk());
  ASSERT_TRUE(loadCachedProbes(cache.path, &t));
  expectOldEntry(t.probes);
  EXPECT_EQ(t.probes.measuredBy, Probes::kByTool);
  const std::string report = formatReport(t);
  EXPECT_NE(report.find("Probes (lanes-topo --probe; GPU copies from pinned host memory, best of "
                        "several 256 MiB copies):"),
            std::string::npos)
      << report;
  EXPECT_EQ(report.find("copies 4 KiB"), std::string::npos) << report;
  EXPECT_EQ(report.find("stream flag"), std::string::npos) << report;
}

}  // namespace
}  // namespace lanes::topo::testing
