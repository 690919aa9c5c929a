// Command line of lanes_soak.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace lanes::soak {

struct SoakOptions {
  double seconds = 30;        // how long to keep issuing collectives
  int ranks = 0;              // 0: take the launcher's world (lanes-run); N: fork N ranks here
  uint64_t seed = 1;          // every rank draws the same operation sequence from it
  size_t maxBytes = 1 << 20;  // largest per-rank buffer of one collective
  bool verbose = false;       // print every operation (rank 0)
};

// "" on success, else a sentence saying what is wrong (usage follows it).
std::string parseSoakOptions(int argc, char** argv, SoakOptions* out);
const char* soakUsage();

}  // namespace lanes::soak
