#include "core/env.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/log.h"
#include "core/nccl_env.h"

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

int64_t envInt(const char* name, int64_t fallback) {
  auto v = envString(name);
  if (!v) return fallback;
  int64_t out = 0;
  if (!parseInt64(*v, &out)) {
    LANES_WARN(Env, -1, "%s=%s is not an integer; using %lld", name, v->c_str(),
               static_cast<long long>(fallback));
    return fallback;
  }
  return out;
}

uint64_t envSize(const char* name, uint64_t fallback) {
  auto v = envString(name);
  if (!v) return fallback;
  uint64_t out = 0;
  if (!parseSize(*v, &out)) {
    LANES_WARN(Env, -1, "%s=%s is not a size; using %llu", name, v->c_str(),
               static_cast<unsigned long long>(fallback));
    return fallback;
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
    LANES_WARN(Env, -1, "%s=%s is not a non-negative number; using %g", name, v->c_str(), fallback);
    return fallback;
  }
  return d;
}

bool envBool(const char* name, bool fallback) {
  auto v = envString(name);
  if (!v) return fallback;
  const std::string& s = *v;
  if (s == "1" || s == "true" || s == "TRUE" || s == "yes" || s == "on") return true;
  if (s == "0" || s == "false" || s == "FALSE" || s == "no" || s == "off") return false;
  LANES_WARN(Env, -1, "%s=%s is not a boolean (0/1); using %d", name, s.c_str(), fallback ? 1 : 0);
  return fallback;
}

double defaultTimeoutSeconds() { return envDouble("LANES_TIMEOUT", 300.0); }
double bootstrapTimeoutSeconds() { return envDouble("LANES_BOOTSTRAP_TIMEOUT", 120.0); }

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
