#include "observe/metrics_exporter.h"

#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>
#include <thread>

#include "base/env.h"
#include "base/host_id.h"
#include "base/log.h"
#include "observe/http_endpoint.h"
#include "observe/metrics.h"

namespace lanes {
namespace {

std::string expandPath(const std::string& pattern, const MetricsPlace& place) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    switch (pattern[++i]) {
      case 'h':
        out += hostName();
        break;
      case 'p':
        out += std::to_string(getpid());
        break;
      case 'r':
        out += std::to_string(place.rank);
        break;
      case '%':
        out += '%';
        break;
      default:
        out += '%';
        out += pattern[i];
    }
  }
  return out;
}

// Written whole to a temporary file, then renamed over: a reader never sees half.
bool writeAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return false;
  const bool wrote = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !wrote || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

class Exporter {
 public:
  Status start(const MetricsSpec& spec, const MetricsPlace& place) {
    if (spec.http) {
      const int port = spec.port == 0 ? 0 : spec.port + place.localIndex;
      LANES_RETURN_IF_ERROR(HttpEndpoint::start(
          spec.address, port, [] { return MetricsRegistry::process().exposition(); }, &endpoint_));
      LANES_INFO(Init, place.rank, "metrics: serving http://%s:%d/metrics", spec.address.c_str(),
                 endpoint_->port());
    }
    if (!spec.file.empty()) {
      path_ = expandPath(spec.file, place);
      if (!writeAtomically(path_, MetricsRegistry::process().exposition()))
        return systemError("metrics: cannot write " + path_ +
                           " (LANES_METRICS file=): check that its folder exists and is writable");
      LANES_INFO(Init, place.rank, "metrics: writing %s every %g s", path_.c_str(),
                 spec.intervalSeconds);
      const auto interval = std::chrono::duration<double>(spec.intervalSeconds);
      writer_ = std::jthread([this, interval](std::stop_token stop) {
        std::mutex mutex;
        std::condition_variable_any wake;
        std::unique_lock<std::mutex> lock(mutex);
        for (;;) {
          (void)wake.wait_for(lock, stop, interval, [] { return false; });
          if (stop.stop_requested()) return;
          (void)writeAtomically(path_, MetricsRegistry::process().exposition());
        }
      });
    }
    return Status::ok();
  }
  ~Exporter() {
    // A child forked after the start has neither thread: nothing to join or
    // stop there (its exit must not wait for them).
    if (getpid() != owner_) {
      if (writer_.joinable()) writer_.detach();
      (void)endpoint_.release();
      return;
    }
    if (writer_.joinable()) {
      writer_.request_stop();
      writer_.join();
      (void)writeAtomically(path_, MetricsRegistry::process().exposition());  // the final counts
    }
  }
  int port() const { return endpoint_ ? endpoint_->port() : 0; }

 private:
  pid_t owner_ = getpid();
  std::unique_ptr<HttpEndpoint> endpoint_;
  std::string path_;
  std::jthread writer_;
};

struct ExporterState {
  std::mutex mutex;
  std::optional<Status> started;  // the first start's outcome
  Exporter exporter;
};

ExporterState& state() {
  static ExporterState s;
  return s;
}

}  // namespace

Status parseMetricsSpec(std::string_view text, MetricsSpec* out) {
  MetricsSpec spec;
  const std::string syntax =
      " (LANES_METRICS takes items separated by commas: http=PORT, http=ADDRESS:PORT, "
      "file=PATH, interval=SECONDS)";
  size_t at = 0;
  while (at <= text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string item(text.substr(at, end - at));
    at = end + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (eq == std::string::npos || value.empty())
      return invalidArgument("LANES_METRICS item \"" + item + "\" has no value" + syntax);
    if (key == "http") {
      std::string port = value;
      const size_t colon = value.rfind(':');
      if (colon != std::string::npos) {
        spec.address = value.substr(0, colon);
        port = value.substr(colon + 1);
      }
      int64_t p = -1;
      if (!parseInt64(port, &p) || p < 0 || p > 65535)
        return invalidArgument("LANES_METRICS http port \"" + port + "\" is not 0-65535" + syntax);
      spec.http = true;
      spec.port = static_cast<int>(p);
    } else if (key == "file") {
      spec.file = value;
    } else if (key == "interval") {
      char* endp = nullptr;
      const double s = std::strtod(value.c_str(), &endp);
      if (endp == value.c_str() || *endp != '\0' || !(s >= 0.1) || s > 86400)
        return invalidArgument("LANES_METRICS interval \"" + value +
                               "\" is not a number of seconds from 0.1 to 86400" + syntax);
      spec.intervalSeconds = s;
    } else {
      return invalidArgument("LANES_METRICS item \"" + item + "\" is not known" + syntax);
    }
  }
  if (!spec.any())
    return invalidArgument("LANES_METRICS=\"" + std::string(text) +
                           "\" names no http= or file=" + syntax);
  *out = std::move(spec);
  return Status::ok();
}

Status MetricsExporter::startOnce(const MetricsSpec& spec, const MetricsPlace& place) {
  // Made first, so destroyed after the exporter whose last write reads it.
  (void)MetricsRegistry::process();
  ExporterState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.started) s.started = s.exporter.start(spec, place);
  return *s.started;
}

int MetricsExporter::servedPort() {
  ExporterState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.exporter.port();
}

}  // namespace lanes
