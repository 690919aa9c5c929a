// NCCL_* names for libnccl.so.2. A job tuned for NCCL sets NCCL_* variables;
// once the NCCL layer enables them, each LANES_* variable left unset takes its
// NCCL twin's value (translated where NCCL's values mean something else), and
// every NCCL_* name is accounted for once at INFO, so none is silently misread
// or silently dropped. liblanes alone never reads NCCL_*.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace lanes {

// Called once by the NCCL layer when libnccl.so.2 loads. Safe from a library
// constructor: the log configuration is re-read lazily, at its next use.
void enableNcclEnvironment();
bool ncclEnvironmentEnabled();
// Unit tests share one process: turns the twins (and the NCCL log tags) on or
// off again and re-arms logNcclEnvironmentOnce.
void setNcclEnvironmentForTest(bool on);

// The value LANES_x takes while unset: its NCCL twin's, translated; nullopt
// when the twins are off, LANES_x has no twin, the twin is unset or empty, or
// its value means nothing to Lanes. Never logs: the log configuration itself
// is read through it, under the log lock.
std::optional<std::string> ncclTwinValue(const char* lanesName);

// The lines logNcclEnvironmentOnce prints: the twins set and what became of
// each, then the other NCCL_* variables set, as ignored. A line with nothing
// to list is left out.
std::vector<std::string> ncclEnvironmentReport();
// Prints ncclEnvironmentReport() at INFO (subsystem ENV) the first time it is
// called in the process with the twins on; the lead calls it at every
// communicator init.
void logNcclEnvironmentOnce(int rank);

// A message as an NCCL user reads it while the twins are on: Lanes' API names
// (lanesCommAbort, lanesInvalidUsage, lanesConfig_t) become NCCL's, and
// LANES_DEBUG its twin NCCL_DEBUG. Unchanged while the twins are off.
std::string ncclSpelling(std::string message);

}  // namespace lanes
