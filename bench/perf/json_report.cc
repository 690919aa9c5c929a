#include "perf/json_report.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdarg>
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

// printf onto the end of text.
__attribute__((format(printf, 2, 3))) void appendf(std::string& text, const char* fmt, ...) {
  va_list ap, again;
  va_start(ap, fmt);
  va_copy(again, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  if (n > 0) {
    const size_t at = text.size();
    text.resize(at + static_cast<size_t>(n) + 1);
    std::vsnprintf(text.data() + at, static_cast<size_t>(n) + 1, fmt, again);
    text.resize(at + static_cast<size_t>(n));
  }
  va_end(again);
}

// The whole of text into file (created or truncated); false with *error set.
bool writeText(const std::string& file, const std::string& text, std::string* error) {
  auto failed = [&] {
    const int e = errno;
    *error = "could not write " + file + ": " + std::strerror(e) +
             " (check that the -J folder exists and is writable)";
    return false;
  };
  std::unique_ptr<FILE, FileCloser> f(std::fopen(file.c_str(), "w"));
  if (!f) return failed();
  if (std::fwrite(text.data(), 1, text.size(), f.get()) != text.size() ||
      std::fflush(f.get()) != 0) {
    return failed();
  }
  // fclose can still fail (NFS reports errors there); release() so it runs once.
  if (std::fclose(f.release()) != 0) return failed();
  return true;
}

std::string timing(const JsonReport::Timing& t) {
  return "{\"time\": " + num(t.timeUs) + ", \"alg_bw\": " + num(t.algBw) +
         ", \"bus_bw\": " + num(t.busBw) +
         ", \"nwrong\": " + (t.wrong < 0 ? std::string("null") : std::to_string(t.wrong)) + "}";
}

}  // namespace

std::string JsonReport::render(const Footer& footer) const {
  std::string text;
  const Header& h = header_;
  appendf(text, "{\"version\": 2, \"tool\": %s, \"collective\": %s, \"nranks\": %d,\n",
          str(h.tool).c_str(), str(h.collective).c_str(), h.nranks);
  appendf(text, "\"memory\": %s, \"graph_launches\": %d, \"command\": %s,\n", str(h.memory).c_str(),
          h.graphLaunches, str(h.command).c_str());
  appendf(text, "\"environment\": {");
  for (size_t i = 0; i < h.environment.size(); ++i) {
    appendf(text, "%s%s: %s", i ? ", " : "", str(h.environment[i].first).c_str(),
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
  appendf(text, "},\n\"topology\": {\"hosts\": %zu, \"ranks_per_host\": %d, \"gpus\": [",
          perHost.size(), ranksPerHost);
  for (size_t i = 0; i < gpus.size(); ++i)
    appendf(text, "%s%s", i ? ", " : "", str(gpus[i]).c_str());
  appendf(text, "]},\n\"ranks\": [");
  for (size_t i = 0; i < places_.size(); ++i) {
    const Place& p = places_[i];
    appendf(text, "%s\n  {\"rank\": %d, \"host\": %s, \"gpu\": %d, \"device\": %s}", i ? "," : "",
            p.rank, str(p.host).c_str(), p.gpu, str(p.label).c_str());
  }
  // GB/s (1e9 bytes/s); d2d_copy and host_copy count bytes copied (memory
  // traffic is 2x). A GPU entry has no host_copy; a host entry (gpu -1) has
  // null GPU rates.
  appendf(text, "],\n\"bounds\": [");
  for (size_t i = 0; i < bounds_.size(); ++i) {
    const Bound& b = bounds_[i];
    auto g = [&](double CopyBounds::*m) -> std::optional<double> {
      if (!b.gpuRates) return std::nullopt;
      return (*b.gpuRates).*m;
    };
    appendf(text,
            "%s\n  {\"host\": %s, \"gpu\": %d, \"bytes\": %zu, \"h2d\": %s, \"d2h\": %s, "
            "\"both_h2d\": %s, \"both_d2h\": %s, \"d2d_copy\": %s, \"host_copy\": %s}",
            i ? "," : "", str(b.host).c_str(), b.gpu, b.bytes, num(g(&CopyBounds::h2d)).c_str(),
            num(g(&CopyBounds::d2h)).c_str(), num(g(&CopyBounds::bothH2d)).c_str(),
            num(g(&CopyBounds::bothD2h)).c_str(), num(g(&CopyBounds::d2dCopy)).c_str(),
            num(b.hostCopy).c_str());
  }
  appendf(text, "],\n\"results\": [");
  for (size_t i = 0; i < rows_.size(); ++i) {
    const Row& r = rows_[i];
    appendf(text,
            "%s\n  {\"backend\": %s, \"size\": %llu, \"count\": %llu, \"type\": %s, "
            "\"redop\": %s, \"root\": %d, \"plan\": %s, \"bound_bus_bw\": %s, "
            "\"out_of_place\": %s, \"in_place\": %s}",
            i ? "," : "", str(r.backend).c_str(), static_cast<unsigned long long>(r.size),
            static_cast<unsigned long long>(r.count), str(r.type).c_str(), str(r.redop).c_str(),
            r.root, str(r.plan).c_str(), num(r.boundBusBw).c_str(), timing(r.out).c_str(),
            timing(r.in).c_str());
  }
  appendf(text, "\n],\n\"avg_bus_bw\": %s, \"avg_bus_bw_by_backend\": {",
          num(footer.avgBusBw).c_str());
  for (size_t i = 0; i < footer.avgByBackend.size(); ++i) {
    appendf(text, "%s%s: %s", i ? ", " : "", str(footer.avgByBackend[i].first).c_str(),
            num(footer.avgByBackend[i].second).c_str());
  }
  appendf(text, "}, \"out_of_bounds\": %d, \"complete\": %s}\n", footer.errors,
          footer.complete ? "true" : "false");
  return text;
}

bool JsonReport::write(const std::string& path, const Footer& footer, std::string* error) const {
  const std::string tmp = path + ".tmp";
  if (!writeText(tmp, render(footer), error)) return false;
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    *error = "could not rename " + tmp + " over " + path + ": " + std::strerror(e);
    return false;
  }
  return true;
}

bool JsonReport::save(const std::string& path, const Footer& footer, std::string* error) {
  if (!targetChecked_) {
    // rename() would replace a FIFO, a device (-J /dev/stdout) or a symlink
    // with a plain file: those get the one document at the end, as before.
    struct stat st {};
    direct_ = ::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
    targetChecked_ = true;
  }
  if (direct_) return footer.complete ? writeText(path, render(footer), error) : true;
  const Clock::time_point start = Clock::now();
  if (!footer.complete && written_ && start - lastEnd_ < 10 * lastCost_) return true;
  const bool ok = write(path, footer, error);
  lastEnd_ = Clock::now();
  lastCost_ = lastEnd_ - start;
  written_ = true;
  return ok;
}

}  // namespace lanes::perf
