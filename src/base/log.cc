#include "base/log.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "base/env.h"
#include "base/nccl_env.h"
#include "base/status.h"
#include "lanes/lanes.h"

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

// A child forked while another thread logs (a bootstrap root dropping a
// stranger, say) would inherit the lock held and hang at its first log line:
// fork waits for the lock and the child starts with it released.
[[maybe_unused]] const bool gForkSafe = [] {
  ::pthread_atfork([] { gLogMutex.lock(); }, [] { gLogMutex.unlock(); },
                   [] { gLogMutex.unlock(); });
  return true;
}();
// What logEnabled reads without the lock (a reload may run meanwhile).
std::atomic<int> gLevel{0};
std::atomic<unsigned> gMask{0};
// Generations, not a flag: a logConfigStale() that lands while a reload reads
// the environment must still cause the next one.
std::atomic<unsigned> gWantedGen{1};
std::atomic<unsigned> gLoadedGen{0};

// A bad LANES_DEBUG* value, found while the log lock is held: logged by the
// caller once the lock is released (logging takes that lock).
struct BadValue {
  const char* name;
  std::string value, problem, used;
};

void loadLocked(std::vector<BadValue>* bad) {
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
    else
      bad->push_back({"LANES_DEBUG", *level, "is not NONE, WARN, INFO or TRACE", "WARN"});
  }
  if (auto subsys = envString("LANES_DEBUG_SUBSYS")) {
    std::string list = *subsys;
    bool exclude = list[0] == '^';
    if (exclude) list.erase(0, 1);
    unsigned mask = 0;
    std::string known, unknown;
    size_t start = 0;
    while (start <= list.size()) {
      size_t comma = list.find(',', start);
      if (comma == std::string::npos) comma = list.size();
      const std::string name = list.substr(start, comma - start);
      const unsigned bit = subsysBit(name);
      std::string& into = bit != 0 ? known : unknown;
      if (!name.empty()) into += (into.empty() ? "" : ",") + name;
      mask |= bit;
      start = comma + 1;
    }
    c.mask = exclude ? ~mask : mask;
    if (!unknown.empty())
      bad->push_back({"LANES_DEBUG_SUBSYS", *subsys,
                      "names " + unknown +
                          ", not a subsystem (INIT, BOOTSTRAP, TRANSPORT, COLL, PLAN, TOPO, ENV, "
                          "ALL)",
                      known.empty() ? (exclude ? "ALL" : "none (no subsystem logs)")
                                    : (exclude ? "^" : "") + known});
  }
  if (gConfig.out != stderr && gConfig.out != nullptr) fclose(gConfig.out);
  c.out = stderr;
  if (auto file = envString("LANES_DEBUG_FILE")) {
    std::string path = expandPath(file->c_str(), c.host);
    if (FILE* fp = fopen(path.c_str(), "a")) {
      setvbuf(fp, nullptr, _IOLBF, 0);
      c.out = fp;
    } else {
      const int err = errno;
      bad->push_back({"LANES_DEBUG_FILE", *file,
                      "cannot be opened for appending (" + (path == *file ? "" : path + ": ") +
                          errnoText(err) + ")",
                      "stderr"});
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

void warnAbout(const std::vector<BadValue>& bad) {
  for (const BadValue& b : bad) envWarnOnce(b.name, b.value, b.problem, b.used);
}

void ensureLoaded() {
  if (!stale()) return;
  std::vector<BadValue> bad;
  {
    // Load once: threads that all saw "not loaded" must not reload the
    // config under another thread already reading it (a data race TSan reports).
    std::lock_guard<std::mutex> lock(gLogMutex);
    if (stale()) loadLocked(&bad);
  }
  warnAbout(bad);
}

std::atomic<bool> gVersionLogged{false};

}  // namespace

void logReloadConfig() {
  std::vector<BadValue> bad;
  {
    std::lock_guard<std::mutex> lock(gLogMutex);
    loadLocked(&bad);
  }
  warnAbout(bad);
}

void logConfigStale() { gWantedGen.fetch_add(1, std::memory_order_acq_rel); }

namespace {
thread_local int tQuiet = 0;  // ScopedQuietLog depth on this thread
}  // namespace

ScopedQuietLog::ScopedQuietLog() { ++tQuiet; }
ScopedQuietLog::~ScopedQuietLog() { --tQuiet; }

bool logEnabled(LogLevel level, LogSubsys subsys) {
  if (tQuiet > 0 && level != LogLevel::Warn) return false;
  ensureLoaded();
  // WARN lines show whatever LANES_DEBUG_SUBSYS says, as NCCL's do: a
  // warning about the list itself must not be hidden by the list.
  return static_cast<int>(level) <= gLevel.load(std::memory_order_relaxed) &&
         (level == LogLevel::Warn ||
          (gMask.load(std::memory_order_relaxed) & static_cast<unsigned>(subsys)) != 0);
}

bool logLevelOn(LogLevel level) {
  ensureLoaded();
  return static_cast<int>(level) <= gLevel.load(std::memory_order_relaxed);
}

void logVersionOnce(int rank) {
  // As NCCL's "NCCL version 2.x.y": which library answered, once per process.
  // Only counted once printed, so a later communicator with INFO on shows it.
  if (!logEnabled(LogLevel::Info, LogSubsys::Init) || gVersionLogged.exchange(true)) return;
  LANES_INFO(Init, rank, "Lanes version %d.%d.%d (%s)", LANES_MAJOR, LANES_MINOR, LANES_PATCH,
#ifdef LANES_HAVE_CUDA
             "built with CUDA"
#else
             "built without CUDA: host memory only"
#endif
  );
}

void setVersionLoggedForTest(bool logged) { gVersionLogged.store(logged); }

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
