// lanes_hypercube_perf: nccl-tests' hypercube_perf for Lanes (flags: --help).
// Power-of-two rank counts only, as nccl-tests.
#include "perf/driver.h"

int main(int argc, char** argv) {
  return lanes::perf::perfMain(argc, argv, lanes::perf::hyperCubeSpec());
}
