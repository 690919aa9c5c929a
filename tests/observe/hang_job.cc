// A job that hangs, for lanes-run's dump request (tests/multi/test_flight_recorder.cc):
//   lanes_hang_job SKIPPER
// Every rank runs one all-reduce; then rank SKIPPER sleeps while the others
// start a second one, which waits for it until LANES_TIMEOUT.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "lanes/lanes.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: lanes_hang_job SKIPPER\n");
    return 2;
  }
  const int skipper = std::atoi(argv[1]);
  lanesComm_t comm = nullptr;
  if (lanesCommInitFromEnv(&comm, nullptr) != lanesSuccess) {
    std::fprintf(stderr, "hang job: init: %s\n", lanesGetLastError(nullptr));
    return 1;
  }
  int rank = 0;
  lanesCommUserRank(comm, &rank);
  std::vector<float> buf(1024, 1.0f);
  for (int call = 0; call < 2; ++call) {
    if (call == 1 && rank == skipper)
      for (;;) pause();  // a handled signal (SIGUSR1) ends one pause, not the wait
    if (lanesAllReduce(buf.data(), buf.data(), buf.size(), lanesFloat32, lanesSum, comm, nullptr) !=
        lanesSuccess) {
      std::fprintf(stderr, "hang job: allreduce %d: %s\n", call, lanesGetLastError(comm));
      return 1;
    }
  }
  return 0;
}
