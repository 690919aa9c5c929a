// lanes_broadcast_perf: nccl-tests' broadcast_perf for Lanes (flags: --help).
#include "perf/driver.h"

int main(int argc, char** argv) {
  return lanes::perf::perfMain(argc, argv, lanes::perf::broadcastSpec());
}
