// Reading LANES_* variables. Every variable read anywhere is listed in
// docs/env.md; the NCCL layer maps NCCL_* names onto these.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/status.h"

namespace lanes {

// The variable's value, or nullopt when unset or empty. Under libnccl.so.2 an
// unset LANES_x takes its NCCL twin's value (core/nccl_env.h). Every reader
// below goes through this one.
std::optional<std::string> envString(const char* name);
// Integer value or `fallback`; a value that is not an integer is logged as a
// warning and the fallback used.
int64_t envInt(const char* name, int64_t fallback);
double envDouble(const char* name, double fallback);
// Size value ("64M", "256K", "8") or `fallback`; a value that is not a size
// is logged as a warning and the fallback used.
uint64_t envSize(const char* name, uint64_t fallback);
bool envBool(const char* name, bool fallback);

// Parses "123", "-4" (whole string) into *out.
bool parseInt64(const std::string& text, int64_t* out);
// Parses sizes like "64M", "1G", "512K", "8" (bytes) into *out.
bool parseSize(const std::string& text, uint64_t* out);

// Process-wide defaults, read once.
double defaultTimeoutSeconds();    // LANES_TIMEOUT, default 300
double bootstrapTimeoutSeconds();  // LANES_BOOTSTRAP_TIMEOUT, default 120

}  // namespace lanes
