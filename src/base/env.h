// Reading LANES_* variables. Every variable read anywhere is listed in
// docs/env.md; the NCCL layer maps NCCL_* names onto these.
//
// The rule every reader follows: a value that is unparsable or out of range
// is never silently replaced. It is logged once (per variable and value, per
// process) as "NAME=VALUE <what is wrong>; using <the value used>", through
// the typed readers below or, for readers of their own, envWarnOnce.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "base/status.h"

namespace lanes {

// The variable's value, or nullopt when unset or empty. Under libnccl.so.2 an
// unset LANES_x takes its NCCL twin's value (core/nccl_env.h). Every reader
// below goes through this one.
std::optional<std::string> envString(const char* name);

// Integer value, or `fallback` when unset. A value that is not an integer
// warns and gives `fallback`; one outside [min, max] warns and gives the
// nearer bound (LANES_NLANES=1 -> 2).
int64_t envInt(const char* name, int64_t fallback,
               int64_t min = std::numeric_limits<int64_t>::min(),
               int64_t max = std::numeric_limits<int64_t>::max());
// Size value ("64M", "256K", "8"), or `fallback` when unset; the same rule
// for values that are not sizes or lie outside [min, max].
uint64_t envSize(const char* name, uint64_t fallback, uint64_t min = 0,
                 uint64_t max = std::numeric_limits<uint64_t>::max());
// A non-negative number (seconds), or `fallback`; anything else warns.
double envDouble(const char* name, double fallback);
// 1/0, true/false, yes/no, on/off (any case), or `fallback`; anything else warns.
bool envBool(const char* name, bool fallback);

// Logs "NAME=VALUE <problem>; using <used>" at WARN, the first time this
// variable has this value in the process (a reader may run per communicator
// or per call; the user needs to read it once). Returns whether it logged.
bool envWarnOnce(const char* name, const std::string& value, const std::string& problem,
                 const std::string& used);
// "256K", "16M" where the size is a whole multiple, else the number of bytes.
std::string sizeText(uint64_t bytes);

// Parses "123", "-4" (whole string) into *out.
bool parseInt64(const std::string& text, int64_t* out);
// Parses sizes like "64M", "1G", "512K", "8" (bytes) into *out.
bool parseSize(const std::string& text, uint64_t* out);

// Process-wide defaults, read once.
double defaultTimeoutSeconds();    // LANES_TIMEOUT, default 300
double bootstrapTimeoutSeconds();  // LANES_BOOTSTRAP_TIMEOUT, default 120

}  // namespace lanes
