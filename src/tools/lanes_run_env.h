// The environment lanes-run hands every rank (the LANES_* launch contract
// that lanesCommInitFromEnv reads).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace lanes::run {

// What all ranks share: where rank 0 serves the rendezvous, and its secret.
struct JobEnv {
  std::string rootAddr;  // host:port
  std::string secret;    // 64 hex characters
};

// Keeps the caller's LANES_ROOT_ADDR / LANES_BOOTSTRAP_SECRET when set;
// otherwise picks a free port on 127.0.0.1 (bind port 0, read it, close) and
// draws 32 random bytes from getrandom.
Status makeJobEnv(JobEnv* out);

// The variables one rank gets, as NAME/value pairs.
std::vector<std::pair<std::string, std::string>> rankEnv(const JobEnv& job, int rank, int nranks);

}  // namespace lanes::run
