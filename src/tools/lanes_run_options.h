// lanes-run's command line: how many ranks, limits, and the program to start.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace lanes::run {

struct RunOptions {
  int nranks = 0;
  double timeoutSeconds = 0;  // 0: no limit
  double graceSeconds = 10;   // LANES_RUN_GRACE: time the survivors get to fail by themselves
  bool prefix = true;         // "[rank] " before forwarded lines (not rank 0's stdout)
  bool help = false;
  std::vector<std::string> command;  // PROGRAM ARGS...
};

// Parses argv (without argv[0]). Options stop at "--" or the first word that
// is not an option, so the program's own flags are never taken.
Status parseRunOptions(const std::vector<std::string>& args, RunOptions* out);
const char* runUsage();

}  // namespace lanes::run
