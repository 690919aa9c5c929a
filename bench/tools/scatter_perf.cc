// lanes_scatter_perf: nccl-tests' scatter_perf for Lanes (flags: --help).
#include "perf/driver.h"

int main(int argc, char** argv) {
  return lanes::perf::perfMain(argc, argv, lanes::perf::scatterSpec());
}
