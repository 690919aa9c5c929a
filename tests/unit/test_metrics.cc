// Metrics: the exposition follows the Prometheus text format (one HELP and
// TYPE per family, escaped labels, cumulative buckets ending in +Inf equal
// to the count), counts what was counted, keeps a destroyed communicator's
// counts, and LANES_METRICS' syntax is read or refused naming the item.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "observe/metrics.h"
#include "observe/metrics_exporter.h"

namespace lanes::testing {
namespace {

// Sample lines by "name{labels}".
std::map<std::string, std::string> samples(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    out[line.substr(0, space)] = line.substr(space + 1);
  }
  return out;
}

TEST(Metrics, CountsCallsBytesPlansTransportsWaitsAndErrors) {
  MetricsRegistry registry;
  auto m = std::make_shared<CommMetrics>("tp", "0x01", 3);
  registry.add(m);
  for (int i = 0; i < 5; ++i)
    m->countCall(static_cast<size_t>(CollType::AllReduce), lanesFloat32, false, 4096, 20'000, true);
  m->countCall(kMetricSend, lanesInt8, true, 100, 3'000, true);
  m->countCall(kMetricRecv, lanesInt8, true, 0, 0, false);
  m->countPlan("allreduce", "ring", 4096);
  m->countPlan("allreduce", "ring", 4096);
  m->countTransport("shm", 10, 20);
  m->countTransport("tcp", 1, 2);
  m->countTransport("shm", 5, 5);
  m->countPeerWait(1'500'000'000);
  m->countError(lanesTimeout);
  registry.countError(lanesInvalidArgument);
  const std::string text = registry.exposition();
  const auto s = samples(text);
  const std::string l = "comm=\"tp\",comm_id=\"0x01\",rank=\"3\"";
  EXPECT_EQ(s.at("lanes_communicators"), "1");
  EXPECT_EQ(s.at("lanes_calls_total{" + l +
                 ",collective=\"allreduce\",datatype=\"float32\",memory=\"host\"}"),
            "5");
  EXPECT_EQ(s.at("lanes_bytes_total{" + l +
                 ",collective=\"allreduce\",datatype=\"float32\",memory=\"host\"}"),
            "20480");
  EXPECT_EQ(
      s.at("lanes_calls_total{" + l + ",collective=\"send\",datatype=\"int8\",memory=\"device\"}"),
      "1");
  EXPECT_EQ(
      s.at("lanes_calls_total{" + l + ",collective=\"recv\",datatype=\"int8\",memory=\"device\"}"),
      "1");
  const std::string h = l + ",collective=\"allreduce\",size_class=\"0-4K\"";
  EXPECT_EQ(s.at("lanes_host_call_seconds_count{" + h + "}"), "5");
  EXPECT_EQ(s.at("lanes_host_call_seconds_bucket{" + h + ",le=\"1e-05\"}"), "0");
  EXPECT_EQ(s.at("lanes_host_call_seconds_bucket{" + h + ",le=\"2.5e-05\"}"), "5");
  EXPECT_EQ(s.at("lanes_host_call_seconds_bucket{" + h + ",le=\"+Inf\"}"), "5");
  EXPECT_DOUBLE_EQ(std::stod(s.at("lanes_host_call_seconds_sum{" + h + "}")), 1e-4);
  // A recv in a group timed under its send adds no latency sample.
  EXPECT_EQ(
      s.at("lanes_device_enqueue_seconds_count{" + l + ",collective=\"send\",size_class=\"0-4K\"}"),
      "1");
  EXPECT_EQ(s.count("lanes_device_enqueue_seconds_count{" + l +
                    ",collective=\"recv\",size_class=\"0-4K\"}"),
            0u);
  EXPECT_EQ(s.at("lanes_plan_calls_total{" + l + ",collective=\"allreduce\",plan=\"ring\"}"), "2");
  EXPECT_EQ(s.at("lanes_plan_bytes_total{" + l + ",collective=\"allreduce\",plan=\"ring\"}"),
            "8192");
  EXPECT_EQ(s.at("lanes_transport_bytes_total{" + l + ",transport=\"shm\",direction=\"sent\"}"),
            "15");
  EXPECT_EQ(s.at("lanes_transport_bytes_total{" + l + ",transport=\"shm\",direction=\"received\"}"),
            "25");
  EXPECT_EQ(s.at("lanes_transport_bytes_total{" + l + ",transport=\"tcp\",direction=\"received\"}"),
            "2");
  EXPECT_EQ(s.at("lanes_peer_wait_seconds_total{" + l + "}"), "1.5");
  EXPECT_EQ(s.at("lanes_errors_total{" + l + ",kind=\"timeout\"}"), "1");
  EXPECT_EQ(s.at("lanes_errors_total{comm=\"\",comm_id=\"\",rank=\"\",kind=\"invalid_argument\"}"),
            "1");
}

TEST(Metrics, EveryFamilyHasOneHelpAndTypeBeforeItsSamples) {
  MetricsRegistry registry;
  for (int r = 0; r < 2; ++r) {
    auto m = std::make_shared<CommMetrics>("c", "0x0" + std::to_string(r), r);
    m->countCall(0, lanesFloat32, false, 8, 1000, true);
    m->countPlan("allreduce", "ring", 8);
    registry.add(m);
  }
  std::istringstream in(registry.exposition());
  std::string line, family;
  std::map<std::string, int> typeLines;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      family = line.substr(7, line.find(' ', 7) - 7);
      ++typeLines[family];
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    const std::string name = line.substr(0, line.find_first_of("{ "));
    // Samples of a histogram carry _bucket, _sum and _count.
    EXPECT_EQ(name.rfind(family, 0), 0u) << name << " under the family " << family;
  }
  for (const auto& [f, n] : typeLines) EXPECT_EQ(n, 1) << f;
  EXPECT_EQ(typeLines.count("lanes_host_call_seconds"), 1u);
}

TEST(Metrics, LabelValuesAreEscaped) {
  MetricsRegistry registry;
  auto m = std::make_shared<CommMetrics>("a\"b\\c\nd", "0x02", 0);
  registry.add(m);
  EXPECT_NE(registry.exposition().find("comm=\"a\\\"b\\\\c\\nd\""), std::string::npos);
}

TEST(Metrics, ADestroyedCommunicatorKeepsItsCounts) {
  MetricsRegistry registry;
  auto m = std::make_shared<CommMetrics>("gone", "0x03", 0);
  registry.add(m);
  m->countCall(0, lanesFloat32, false, 8, 1000, true);
  registry.retire(m.get());
  m.reset();
  const auto s = samples(registry.exposition());
  EXPECT_EQ(s.at("lanes_communicators"), "0");
  EXPECT_EQ(s.at("lanes_calls_total{comm=\"gone\",comm_id=\"0x03\",rank=\"0\",collective="
                 "\"allreduce\",datatype="
                 "\"float32\",memory=\"host\"}"),
            "1");
}

TEST(Metrics, SizeClassesAndBuckets) {
  EXPECT_EQ(metricSizeClass(0), 0u);
  EXPECT_EQ(metricSizeClass(4096), 0u);
  EXPECT_EQ(metricSizeClass(4097), 1u);
  EXPECT_EQ(metricSizeClass(65536), 1u);
  EXPECT_EQ(metricSizeClass(1 << 20), 2u);
  EXPECT_EQ(metricSizeClass((1 << 20) + 1), 3u);
  EXPECT_EQ(metricSizeClass(uint64_t{1} << 40), 4u);
  LatencyHistogram h;
  h.observe(20'000'000'000);  // 20 s: past every bound
  EXPECT_EQ(h.buckets.back().load(), 1u);
}

TEST(MetricsSpec, ReadsEveryItem) {
  MetricsSpec s;
  ASSERT_TRUE(parseMetricsSpec("http=9464", &s).isOk());
  EXPECT_TRUE(s.http);
  EXPECT_EQ(s.address, "127.0.0.1");
  EXPECT_EQ(s.port, 9464);
  EXPECT_TRUE(s.file.empty());
  ASSERT_TRUE(parseMetricsSpec("http=0.0.0.0:0,file=/tmp/m-%h-%r.prom,interval=2.5", &s).isOk());
  EXPECT_EQ(s.address, "0.0.0.0");
  EXPECT_EQ(s.port, 0);
  EXPECT_EQ(s.file, "/tmp/m-%h-%r.prom");
  EXPECT_DOUBLE_EQ(s.intervalSeconds, 2.5);
  ASSERT_TRUE(parseMetricsSpec("file=/x.prom", &s).isOk());
  EXPECT_FALSE(s.http);
}

TEST(MetricsSpec, RefusesNamingTheItem) {
  MetricsSpec s;
  const std::pair<const char*, const char*> bad[] = {
      {"http=99999", "http port \"99999\""},
      {"http=abc", "http port \"abc\""},
      {"http=", "has no value"},
      {"port=1", "\"port=1\" is not known"},
      {"file=/x,interval=0", "interval \"0\""},
      {"interval=5", "names no http= or file="},
      {"", "names no http= or file="},
  };
  for (const auto& [text, why] : bad) {
    Status st = parseMetricsSpec(text, &s);
    EXPECT_EQ(st.code(), lanesInvalidArgument) << text;
    EXPECT_NE(st.message().find(why), std::string::npos) << text << ": " << st.message();
    EXPECT_NE(st.message().find("LANES_METRICS takes"), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace lanes::testing

namespace lanes::testing {
namespace {

// The Grafana example (docs/grafana) queries only families the exposition has.
TEST(Metrics, TheGrafanaDashboardQueriesFamiliesThatExist) {
  std::ifstream in(LANES_GRAFANA_DASHBOARD);
  ASSERT_TRUE(in) << LANES_GRAFANA_DASHBOARD;
  const nlohmann::json dashboard = nlohmann::json::parse(in);
  MetricsRegistry registry;
  std::set<std::string> families;
  std::istringstream text(registry.exposition());
  for (std::string line; std::getline(text, line);)
    if (line.rfind("# TYPE ", 0) == 0) {
      const std::string name = line.substr(7, line.find(' ', 7) - 7);
      families.insert(name);
      if (line.ends_with(" histogram"))
        for (const char* suffix : {"_bucket", "_sum", "_count"}) families.insert(name + suffix);
    }
  const std::regex metric("lanes_[a-z_]+");
  size_t queries = 0;
  for (const auto& panel : dashboard.at("panels"))
    for (const auto& target : panel.at("targets")) {
      const std::string expr = target.at("expr");
      ++queries;
      for (auto it = std::sregex_iterator(expr.begin(), expr.end(), metric);
           it != std::sregex_iterator(); ++it)
        EXPECT_EQ(families.count(it->str()), 1u) << it->str() << " in " << expr;
    }
  EXPECT_GE(queries, 8u);
}

}  // namespace
}  // namespace lanes::testing
