#include "core/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "core/env.h"
#include "core/nccl_env.h"

namespace lanes {
namespace {

struct LogConfig {
  LogLevel level = LogLevel::Warn;
  unsigned mask = static_cast<unsigned>(LogSubsys::All);
  FILE* out = stderr;
  char host[64] = {};
};

unsigned subsysBit(const std::string& name) {
  static const struct {
    const char* name;
    LogSubsys bit;
  } kNames[] = {{"INIT", LogSubsys::Init},
                {"BOOTSTRAP", LogSubsys::Bootstrap},
                {"TRANSPORT", LogSubsys::Transport},
                {"NET", LogSubsys::Transport},
                {"COLL", LogSubsys::Coll},
                {"PLAN", LogSubsys::Plan},
                {"TUNING", LogSubsys::Plan},
                {"TOPO", LogSubsys::Topo},
                {"GRAPH", LogSubsys::Topo},
                {"ENV", LogSubsys::Env},
                {"ALL", LogSubsys::All}};
  for (const auto& n : kNames)
    if (strcasecmp(n.name, name.c_str()) == 0) return static_cast<unsigned>(n.bit);
  return 0;
}

std::string expandPath(const char* pattern, const char* host) {
  std::string out;
  for (const char* p = pattern; *p; ++p) {
    if (p[0] == '%' && p[1] == 'h') {
      out += host;
      ++p;
    } else if (p[0] == '%' && p[1] == 'p') {
      out += std::to_string(getpid());
      ++p;
    } else {
      out += *p;
    }
  }
  return out;
}

std::mutex gLogMutex;  // C API logging state: process-wide by nature
LogConfig gConfig;     // under gLogMutex
// What logEnabled reads without the lock (a reload may run meanwhile).
std::atomic<int> gLevel{0};
std::atomic<unsigned> gMask{0};
// Generations, not a flag: a logConfigStale() that lands while a reload reads
// the environment must still cause the next one.
std::atomic<unsigned> gWantedGen{1};
std::atomic<unsigned> gLoadedGen{0};

void loadLocked() {
  unsigned gen = gWantedGen.load(std::memory_order_acquire);
  LogConfig c;
  gethostname(c.host, sizeof(c.host) - 1);
  // envString: under libnccl.so.2 an unset LANES_DEBUG* takes its NCCL twin.
  if (auto level = envString("LANES_DEBUG")) {
    const char* d = level->c_str();
    if (strcasecmp(d, "NONE") == 0)
      c.level = LogLevel::None;
    else if (strcasecmp(d, "WARN") == 0)
      c.level = LogLevel::Warn;
    else if (strcasecmp(d, "INFO") == 0)
      c.level = LogLevel::Info;
    else if (strcasecmp(d, "TRACE") == 0)
      c.level = LogLevel::Trace;
  }
  if (auto subsys = envString("LANES_DEBUG_SUBSYS")) {
    std::string list = *subsys;
    bool exclude = list[0] == '^';
    if (exclude) list.erase(0, 1);
    unsigned mask = 0;
    size_t start = 0;
    while (start <= list.size()) {
      size_t comma = list.find(',', start);
      if (comma == std::string::npos) comma = list.size();
      mask |= subsysBit(list.substr(start, comma - start));
      start = comma + 1;
    }
    c.mask = exclude ? ~mask : mask;
  }
  if (gConfig.out != stderr && gConfig.out != nullptr) fclose(gConfig.out);
  c.out = stderr;
  if (auto file = envString("LANES_DEBUG_FILE")) {
    std::string path = expandPath(file->c_str(), c.host);
    if (FILE* fp = fopen(path.c_str(), "a")) {
      setvbuf(fp, nullptr, _IOLBF, 0);
      c.out = fp;
    }
  }
  gConfig = c;
  gLevel.store(static_cast<int>(c.level), std::memory_order_relaxed);
  gMask.store(c.mask, std::memory_order_relaxed);
  gLoadedGen.store(gen, std::memory_order_release);
}

bool stale() {
  return gLoadedGen.load(std::memory_order_acquire) != gWantedGen.load(std::memory_order_acquire);
}

}  // namespace

void logReloadConfig() {
  std::lock_guard<std::mutex> lock(gLogMutex);
  loadLocked();
}

void logConfigStale() { gWantedGen.fetch_add(1, std::memory_order_acq_rel); }

bool logEnabled(LogLevel level, LogSubsys subsys) {
  if (stale()) {
    // Load once: threads that all saw "not loaded" must not reload the config
    // under another thread already reading it (a data race TSan reports).
    std::lock_guard<std::mutex> lock(gLogMutex);
    if (stale()) loadLocked();
  }
  return static_cast<int>(level) <= gLevel.load(std::memory_order_relaxed) &&
         (gMask.load(std::memory_order_relaxed) & static_cast<unsigned>(subsys)) != 0;
}

void logMessage(LogLevel level, LogSubsys subsys, int rank, const char* fmt, ...) {
  if (!logEnabled(level, subsys)) return;
  char body[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(body, sizeof(body), fmt, ap);
  va_end(ap);
  static const char* const kTags[2][4] = {{"", "WARN", "INFO", "TRACE"},
                                          {"", "NCCL WARN", "NCCL INFO", "NCCL TRACE"}};
  const char* tag = kTags[ncclEnvironmentEnabled() ? 1 : 0][static_cast<int>(level)];
  std::lock_guard<std::mutex> lock(gLogMutex);
  if (rank >= 0)
    fprintf(gConfig.out, "%s:%d:%d [lanes] %s %s\n", gConfig.host, getpid(), rank, tag, body);
  else
    fprintf(gConfig.out, "%s:%d:- [lanes] %s %s\n", gConfig.host, getpid(), tag, body);
}

}  // namespace lanes
