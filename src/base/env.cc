#include "base/env.h"

#include <strings.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include "base/log.h"
#include "base/nccl_env.h"

namespace lanes {

std::optional<std::string> envString(const char* name) {
  const char* v = std::getenv(name);
  if (v != nullptr && *v != '\0') return std::string(v);
  return ncclTwinValue(name);  // nullopt unless libnccl.so.2 turned the twins on
}

bool parseInt64(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0') return false;
  *out = v;
  return true;
}

bool parseSize(const std::string& text, uint64_t* out) {
  if (text.empty() || text[0] == '-') return false;
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str()) return false;
  uint64_t mult = 1;
  if (*end != '\0') {
    switch (*end) {
      case 'k':
      case 'K':
        mult = 1ull << 10;
        break;
      case 'm':
      case 'M':
        mult = 1ull << 20;
        break;
      case 'g':
      case 'G':
        mult = 1ull << 30;
        break;
      case 't':
      case 'T':
        mult = 1ull << 40;
        break;
      default:
        return false;
    }
    ++end;
    if (*end == 'B' || *end == 'b') ++end;
    if (*end != '\0') return false;
  }
  if (v != 0 && mult > UINT64_MAX / v) return false;
  *out = v * mult;
  return true;
}

namespace {

std::string number(double v) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

}  // namespace

std::string sizeText(uint64_t bytes) {
  static const struct {
    uint64_t unit;
    const char* suffix;
  } kUnits[] = {{1ull << 40, "T"}, {1ull << 30, "G"}, {1ull << 20, "M"}, {1ull << 10, "K"}};
  for (const auto& u : kUnits)
    if (bytes >= u.unit && bytes % u.unit == 0) return std::to_string(bytes / u.unit) + u.suffix;
  return std::to_string(bytes);
}

bool envWarnOnce(const char* name, const std::string& value, const std::string& problem,
                 const std::string& used) {
  // Keyed by value too: a process whose environment does not change warns
  // once per variable; one that sets another bad value (tests do) hears of it.
  static std::mutex mutex;
  static std::set<std::string> warned;
  // Nothing printed, nothing to remember (the fuzzers run at NONE with
  // millions of values).
  if (!logEnabled(LogLevel::Warn, LogSubsys::Env)) return false;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!warned.insert(std::string(name) + "=" + value).second) return false;
  }
  // An NCCL job set the twin, not this name: say where the value came from.
  const char* own = std::getenv(name);
  const bool twin = (own == nullptr || *own == '\0') && ncclEnvironmentEnabled();
  LANES_WARN(Env, -1, "%s=%s%s %s; using %s", name, value.c_str(),
             twin ? " (its NCCL_* twin's value)" : "", problem.c_str(), used.c_str());
  return true;
}

int64_t envInt(const char* name, int64_t fallback, int64_t min, int64_t max) {
  auto v = envString(name);
  if (!v) return fallback;
  int64_t out = 0;
  if (!parseInt64(*v, &out)) {
    envWarnOnce(name, *v, "is not an integer", std::to_string(fallback));
    return fallback;
  }
  if (out < min) {
    envWarnOnce(name, *v, "is below its minimum " + std::to_string(min), std::to_string(min));
    return min;
  }
  if (out > max) {
    envWarnOnce(name, *v, "is above its maximum " + std::to_string(max), std::to_string(max));
    return max;
  }
  return out;
}

uint64_t envSize(const char* name, uint64_t fallback, uint64_t min, uint64_t max) {
  auto v = envString(name);
  if (!v) return fallback;
  uint64_t out = 0;
  if (!parseSize(*v, &out)) {
    envWarnOnce(name, *v, "is not a size (bytes, or with a K, M, G suffix)", sizeText(fallback));
    return fallback;
  }
  if (out < min) {
    envWarnOnce(name, *v, "is below its minimum " + sizeText(min), sizeText(min));
    return min;
  }
  if (out > max) {
    envWarnOnce(name, *v, "is above its maximum " + sizeText(max), sizeText(max));
    return max;
  }
  return out;
}

double envDouble(const char* name, double fallback) {
  auto v = envString(name);
  if (!v) return fallback;
  char* end = nullptr;
  errno = 0;
  double d = std::strtod(v->c_str(), &end);
  if (errno != 0 || end == v->c_str() || *end != '\0' || !(d >= 0)) {
    envWarnOnce(name, *v, "is not a non-negative number", number(fallback));
    return fallback;
  }
  return d;
}

bool envBool(const char* name, bool fallback) {
  auto v = envString(name);
  if (!v) return fallback;
  const char* s = v->c_str();
  for (const char* t : {"1", "true", "yes", "on"})
    if (strcasecmp(s, t) == 0) return true;
  for (const char* f : {"0", "false", "no", "off"})
    if (strcasecmp(s, f) == 0) return false;
  envWarnOnce(name, *v, "is not a boolean (1/0, true/false, yes/no, on/off)", fallback ? "1" : "0");
  return fallback;
}

namespace {

// A timeout of 0 s would fail every wait at once: positive only.
double timeoutFromEnv(const char* name, double fallback) {
  const double v = envDouble(name, fallback);
  if (v > 0) return v;
  envWarnOnce(name, envString(name).value_or(""), "is not a positive number of seconds",
              number(fallback));
  return fallback;
}

}  // namespace

double defaultTimeoutSeconds() { return timeoutFromEnv("LANES_TIMEOUT", 300.0); }
double bootstrapTimeoutSeconds() { return timeoutFromEnv("LANES_BOOTSTRAP_TIMEOUT", 120.0); }

std::string errnoText(int err) {
  char buf[256];
  // GNU strerror_r returns the message pointer.
  const char* msg = strerror_r(err, buf, sizeof(buf));
  std::string text = std::string(msg) + " (errno " + std::to_string(err) + ")";
  // Out of descriptors is a limit, not a bug: say which and how to raise it.
  rlimit lim{};
  if (err == EMFILE && ::getrlimit(RLIMIT_NOFILE, &lim) == 0)
    text += "; this process may open " + std::to_string(lim.rlim_cur) +
            " files (ulimit -n): raise the limit, e.g. ulimit -n 65536";
  if (err == ENFILE) text += "; the system-wide file limit (fs.file-max) is reached";
  return text;
}

}  // namespace lanes
