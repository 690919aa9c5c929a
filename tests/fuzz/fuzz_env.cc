// Fuzzes environment-variable parsing: the launcher variables (rank, size,
// root address, secret, job ids), the typed LANES_* readers, size and port
// range syntax, interface specs. Input: one value per line, assigned in order
// to the names below (an empty line unsets the variable).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/env.h"
#include "base/log.h"
#include "base/socket.h"
#include "bootstrap/bootstrap.h"

using namespace lanes;

namespace {

constexpr const char* kNames[] = {
    "LANES_RANK",   "LANES_WORLD_SIZE", "LANES_LOCAL_RANK", "LANES_ROOT_ADDR",
    "MASTER_ADDR",  "MASTER_PORT",      "LANES_ROOT_PORT",  "LANES_BOOTSTRAP_SECRET",
    "RANK",         "WORLD_SIZE",       "SLURM_PROCID",     "SLURM_NTASKS",
    "SLURM_JOB_ID", "LANES_TIMEOUT",    "LANES_PORT_RANGE", "LANES_SOCKET_IFNAME",
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    // Rejected values are logged as warnings: keep the fuzzer's output readable.
    ::setenv("LANES_DEBUG", "NONE", 1);
    logReloadConfig();
    return true;
  }();
  (void)quiet;
  std::vector<std::string> values;
  std::string text(reinterpret_cast<const char*>(data), size);
  size_t start = 0;
  for (const char* name : kNames) {
    std::string v;
    if (start <= text.size()) {
      size_t nl = text.find('\n', start);
      if (nl == std::string::npos) nl = text.size();
      v = text.substr(start, nl - start);
      start = nl + 1;
    }
    // Environment values are C strings: an embedded NUL ends them.
    v = v.c_str();
    if (v.empty())
      ::unsetenv(name);
    else
      ::setenv(name, v.c_str(), 1);
    values.push_back(v);
  }

  LaunchEnv env;
  if (readLaunchEnv(&env).isOk()) {
    if (env.rank < 0 || env.rank >= env.worldSize) std::abort();
    uint8_t secret[32];
    uint64_t commId = 0;
    (void)launchSecretAndCommId(env, secret, &commId);
  }
  for (const auto& v : values) {
    int64_t i = 0;
    uint64_t u = 0;
    (void)parseInt64(v, &i);
    (void)parseSize(v, &u);
    PortRange range;
    if (parsePortRange(v, &range).isOk() && (range.first < 1 || range.first > range.last))
      std::abort();
    (void)interfaceMatches(v, "eth0");
  }
  (void)envInt("LANES_RANK", 0);
  (void)envBool("LANES_ROOT_PORT", false);
  // Every wait is a Deadline made from such a number.
  (void)Deadline::after(envDouble("LANES_TIMEOUT", 300.0)).remainingMs();
  return 0;
}
