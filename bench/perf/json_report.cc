#include "perf/json_report.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>

namespace lanes::perf {
namespace {

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};

// A JSON string literal: quotes, backslashes and control characters escaped.
std::string str(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// A JSON number; NaN and infinities (a zero time) have no JSON form: null.
std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6f", v);
  return buf;
}
std::string num(const std::optional<double>& v) { return v ? num(*v) : "null"; }

std::string timing(const JsonReport::Timing& t) {
  return "{\"time\": " + num(t.timeUs) + ", \"alg_bw\": " + num(t.algBw) +
         ", \"bus_bw\": " + num(t.busBw) +
         ", \"nwrong\": " + (t.wrong < 0 ? std::string("null") : std::to_string(t.wrong)) + "}";
}

}  // namespace

bool JsonReport::write(const std::string& path, double avgBusBw,
                       const std::vector<std::pair<std::string, double>>& avgByBackend, int errors,
                       std::string* error) const {
  std::unique_ptr<FILE, FileCloser> f(std::fopen(path.c_str(), "w"));
  if (!f) {
    *error = "could not write " + path + ": " + std::strerror(errno);
    return false;
  }
  FILE* o = f.get();
  const Header& h = header_;
  std::fprintf(o, "{\"version\": 2, \"tool\": %s, \"collective\": %s, \"nranks\": %d,\n",
               str(h.tool).c_str(), str(h.collective).c_str(), h.nranks);
  std::fprintf(o, "\"memory\": %s, \"graph_launches\": %d, \"command\": %s,\n",
               str(h.memory).c_str(), h.graphLaunches, str(h.command).c_str());
  std::fprintf(o, "\"environment\": {");
  for (size_t i = 0; i < h.environment.size(); ++i) {
    std::fprintf(o, "%s%s: %s", i ? ", " : "", str(h.environment[i].first).c_str(),
                 str(h.environment[i].second).c_str());
  }
  // Topology from the ranks' places: hosts, the most ranks on one host, and
  // each distinct GPU once (host order, then GPU number).
  std::map<std::string, int> perHost;
  std::set<std::pair<std::string, int>> seen;
  std::vector<std::string> gpus;
  for (const Place& p : places_) {
    ++perHost[p.host];
    if (p.gpu >= 0 && seen.insert({p.host, p.gpu}).second) gpus.push_back(p.label);
  }
  int ranksPerHost = 0;
  for (const auto& [host, n] : perHost) ranksPerHost = std::max(ranksPerHost, n);
  std::fprintf(o, "},\n\"topology\": {\"hosts\": %zu, \"ranks_per_host\": %d, \"gpus\": [",
               perHost.size(), ranksPerHost);
  for (size_t i = 0; i < gpus.size(); ++i)
    std::fprintf(o, "%s%s", i ? ", " : "", str(gpus[i]).c_str());
  std::fprintf(o, "]},\n\"ranks\": [");
  for (size_t i = 0; i < places_.size(); ++i) {
    const Place& p = places_[i];
    std::fprintf(o, "%s\n  {\"rank\": %d, \"host\": %s, \"gpu\": %d, \"device\": %s}", i ? "," : "",
                 p.rank, str(p.host).c_str(), p.gpu, str(p.label).c_str());
  }
  // GB/s (1e9 bytes/s); d2d_copy and host_copy count bytes copied (memory
  // traffic is 2x). A GPU entry has no host_copy; a host entry (gpu -1) has
  // null GPU rates.
  std::fprintf(o, "],\n\"bounds\": [");
  for (size_t i = 0; i < bounds_.size(); ++i) {
    const Bound& b = bounds_[i];
    auto g = [&](double CopyBounds::*m) -> std::optional<double> {
      if (!b.gpuRates) return std::nullopt;
      return (*b.gpuRates).*m;
    };
    std::fprintf(o,
                 "%s\n  {\"host\": %s, \"gpu\": %d, \"bytes\": %zu, \"h2d\": %s, \"d2h\": %s, "
                 "\"both_h2d\": %s, \"both_d2h\": %s, \"d2d_copy\": %s, \"host_copy\": %s}",
                 i ? "," : "", str(b.host).c_str(), b.gpu, b.bytes,
                 num(g(&CopyBounds::h2d)).c_str(), num(g(&CopyBounds::d2h)).c_str(),
                 num(g(&CopyBounds::bothH2d)).c_str(), num(g(&CopyBounds::bothD2h)).c_str(),
                 num(g(&CopyBounds::d2dCopy)).c_str(), num(b.hostCopy).c_str());
  }
  std::fprintf(o, "],\n\"results\": [");
  for (size_t i = 0; i < rows_.size(); ++i) {
    const Row& r = rows_[i];
    std::fprintf(o,
                 "%s\n  {\"backend\": %s, \"size\": %llu, \"count\": %llu, \"type\": %s, "
                 "\"redop\": %s, \"root\": %d, \"plan\": %s, \"bound_bus_bw\": %s, "
                 "\"out_of_place\": %s, \"in_place\": %s}",
                 i ? "," : "", str(r.backend).c_str(), static_cast<unsigned long long>(r.size),
                 static_cast<unsigned long long>(r.count), str(r.type).c_str(),
                 str(r.redop).c_str(), r.root, str(r.plan).c_str(), num(r.boundBusBw).c_str(),
                 timing(r.out).c_str(), timing(r.in).c_str());
  }
  std::fprintf(o, "\n],\n\"avg_bus_bw\": %s, \"avg_bus_bw_by_backend\": {", num(avgBusBw).c_str());
  for (size_t i = 0; i < avgByBackend.size(); ++i) {
    std::fprintf(o, "%s%s: %s", i ? ", " : "", str(avgByBackend[i].first).c_str(),
                 num(avgByBackend[i].second).c_str());
  }
  std::fprintf(o, "}, \"out_of_bounds\": %d}\n", errors);
  if (std::fflush(o) != 0) {
    *error = "could not write " + path + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

}  // namespace lanes::perf
