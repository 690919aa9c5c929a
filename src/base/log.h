// Logging: LANES_DEBUG=WARN|INFO|TRACE, LANES_DEBUG_SUBSYS=INIT,COLL,...
// (or ^INIT to exclude), LANES_DEBUG_FILE with %h (host) and %p (pid).
// Lines start with host:pid:rank so interleaved output of many ranks sorts out.
// Under libnccl.so.2 (core/nccl_env.h) the NCCL_DEBUG* twins count too, and
// the level reads "NCCL WARN" etc., so a grep written for NCCL finds the lines.
#pragma once

#include <cstdarg>

namespace lanes {

enum class LogLevel : int { None = 0, Warn = 1, Info = 2, Trace = 3 };

enum class LogSubsys : unsigned {
  Init = 1u << 0,
  Bootstrap = 1u << 1,
  Transport = 1u << 2,
  Coll = 1u << 3,
  Plan = 1u << 4,
  Topo = 1u << 5,
  Env = 1u << 6,
  All = ~0u,
};

bool logEnabled(LogLevel level, LogSubsys subsys);
// Mutes this thread's INFO and TRACE lines while it lives (WARN still
// prints): the machine probe's own communicators, which a user's log would
// otherwise show by the dozen.
class ScopedQuietLog {
 public:
  ScopedQuietLog();
  ~ScopedQuietLog();
  ScopedQuietLog(const ScopedQuietLog&) = delete;
  ScopedQuietLog& operator=(const ScopedQuietLog&) = delete;
};
// rank < 0 prints "-" in the rank field.
void logMessage(LogLevel level, LogSubsys subsys, int rank, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
// Whether lines of `level` are printed (for some subsystem): the error
// strings hint at LANES_DEBUG=WARN only where it is not on already.
bool logLevelOn(LogLevel level);
// "Lanes version X.Y.Z" at INFO, the first time a communicator is set up
// with INFO on in the process (NCCL logs "NCCL version" so).
void logVersionOnce(int rank);
// Unit tests share one process: lets the next logVersionOnce print again.
void setVersionLoggedForTest(bool logged);
// Re-reads the LANES_DEBUG* variables (tests change them between cases). A
// bad value among them is warned about (envWarnOnce), after the reload.
void logReloadConfig();
// Makes the next log call re-read them. Unlike logReloadConfig, safe from a
// library constructor that may run before this file's statics are set up.
void logConfigStale();

}  // namespace lanes

#define LANES_WARN(subsys, rank, ...) \
  ::lanes::logMessage(::lanes::LogLevel::Warn, ::lanes::LogSubsys::subsys, rank, __VA_ARGS__)
#define LANES_INFO(subsys, rank, ...)                                                              \
  do {                                                                                             \
    if (::lanes::logEnabled(::lanes::LogLevel::Info, ::lanes::LogSubsys::subsys))                  \
      ::lanes::logMessage(::lanes::LogLevel::Info, ::lanes::LogSubsys::subsys, rank, __VA_ARGS__); \
  } while (0)
#define LANES_TRACE(subsys, rank, ...)                                                \
  do {                                                                                \
    if (::lanes::logEnabled(::lanes::LogLevel::Trace, ::lanes::LogSubsys::subsys))    \
      ::lanes::logMessage(::lanes::LogLevel::Trace, ::lanes::LogSubsys::subsys, rank, \
                          __VA_ARGS__);                                               \
  } while (0)
