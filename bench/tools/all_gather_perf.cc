// lanes_all_gather_perf: nccl-tests' all_gather_perf for Lanes (flags: --help).
#include "perf/driver.h"

int main(int argc, char** argv) {
  return lanes::perf::perfMain(argc, argv, lanes::perf::allGatherSpec());
}
