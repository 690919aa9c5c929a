#include "perf/json_report.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

namespace lanes::perf {
namespace {

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};

void timing(FILE* f, const char* key, const JsonReport::Timing& t) {
  std::fprintf(f, "\"%s\": {\"time\": %.6f, \"alg_bw\": %.6f, \"bus_bw\": %.6f, \"nwrong\": ", key,
               t.timeUs, t.algBw, t.busBw);
  if (t.wrong < 0) {
    std::fprintf(f, "null}");
  } else {
    std::fprintf(f, "%lld}", static_cast<long long>(t.wrong));
  }
}

// JSON string body: quotes, backslashes and control characters escaped.
std::string escaped(const std::string& s) {
  std::string out;
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
  return out;
}

}  // namespace

bool JsonReport::write(const std::string& path, const char* collective, int nranks, double avgBusBw,
                       int errors, std::string* error) const {
  std::unique_ptr<FILE, FileCloser> f(std::fopen(path.c_str(), "w"));
  if (!f) {
    *error = "could not write " + path + ": " + std::strerror(errno);
    return false;
  }
  // Names and types are fixed identifiers (no characters that need escaping).
  std::fprintf(f.get(),
               "{\"version\": 1, \"collective\": \"%s\", \"nranks\": %d, \"memory\": \"%s\", "
               "\"graph_launches\": %d,\n\"ranks\": [",
               collective, nranks, escaped(memory_).c_str(), graphLaunches_);
  for (size_t i = 0; i < places_.size(); ++i) {
    const Place& p = places_[i];
    std::fprintf(f.get(), "%s\n  {\"rank\": %d, \"host\": \"%s\", \"gpu\": %d, \"device\": \"%s\"}",
                 i ? "," : "", p.rank, escaped(p.host).c_str(), p.gpu, escaped(p.label).c_str());
  }
  // Bandwidths in GB/s (1e9 bytes/s); d2d_copy counts bytes copied (memory traffic is 2x).
  std::fprintf(f.get(), "],\n\"bounds\": [");
  for (size_t i = 0; i < bounds_.size(); ++i) {
    const Bound& b = bounds_[i];
    std::fprintf(f.get(),
                 "%s\n  {\"host\": \"%s\", \"gpu\": %d, \"bytes\": %zu, \"h2d\": %.3f, "
                 "\"d2h\": %.3f, \"both_h2d\": %.3f, \"both_d2h\": %.3f, \"d2d_copy\": %.3f}",
                 i ? "," : "", escaped(b.host).c_str(), b.gpu, b.bytes, b.gbps.h2d, b.gbps.d2h,
                 b.gbps.bothH2d, b.gbps.bothD2h, b.gbps.d2dCopy);
  }
  std::fprintf(f.get(), "],\n\"results\": [");
  for (size_t i = 0; i < rows_.size(); ++i) {
    const Row& r = rows_[i];
    std::fprintf(f.get(),
                 "%s\n  {\"size\": %llu, \"count\": %llu, \"type\": \"%s\", \"redop\": \"%s\", "
                 "\"root\": %d, ",
                 i ? "," : "", static_cast<unsigned long long>(r.p.size),
                 static_cast<unsigned long long>(r.p.count), r.p.type.c_str(), r.p.redop.c_str(),
                 r.p.root);
    timing(f.get(), "out_of_place", r.out);
    std::fprintf(f.get(), ", ");
    timing(f.get(), "in_place", r.in);
    std::fprintf(f.get(), "}");
  }
  std::fprintf(f.get(), "\n], \"avg_bus_bw\": %.6f, \"out_of_bounds\": %d}\n", avgBusBw, errors);
  return true;
}

}  // namespace lanes::perf
