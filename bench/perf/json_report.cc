#include "perf/json_report.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

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

}  // namespace

bool JsonReport::write(const std::string& path, const char* collective, int nranks, double avgBusBw,
                       int errors, std::string* error) const {
  std::unique_ptr<FILE, FileCloser> f(std::fopen(path.c_str(), "w"));
  if (!f) {
    *error = "could not write " + path + ": " + std::strerror(errno);
    return false;
  }
  // Names and types are fixed identifiers (no characters that need escaping).
  std::fprintf(f.get(), "{\"version\": 1, \"collective\": \"%s\", \"nranks\": %d, \"results\": [",
               collective, nranks);
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
