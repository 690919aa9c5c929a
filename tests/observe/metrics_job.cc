// A job for the metrics scrape test (metrics_scrape.py): a known number of
// calls in two phases, each followed by a pause in which the test scrapes.
//   lanes_metrics_job DIR CALLS
// Phase 1: CALLS float32 all-reduces of 1000 elements and CALLS int32
// broadcasts of 256 from rank 0; then DIR/ready1.<rank>, and a wait for
// DIR/go. Phase 2: CALLS more all-reduces; DIR/ready2.<rank>, a wait for
// DIR/finish; then the communicator is destroyed.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "lanes/lanes.h"

namespace {

bool waitForFile(const std::string& path, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (access(path.c_str(), F_OK) != 0) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

int fail(const char* what, lanesComm_t comm) {
  std::fprintf(stderr, "metrics job: %s: %s\n", what, lanesGetLastError(comm));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: lanes_metrics_job DIR CALLS\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int calls = std::atoi(argv[2]);
  lanesComm_t comm = nullptr;
  if (lanesCommInitFromEnv(&comm, nullptr) != lanesSuccess) return fail("init", nullptr);
  int rank = 0;
  lanesCommUserRank(comm, &rank);
  std::vector<float> data(1000, 1.0f);
  std::vector<int32_t> ints(256, rank);
  auto allReduces = [&] {
    for (int i = 0; i < calls; ++i)
      if (lanesAllReduce(data.data(), data.data(), data.size(), lanesFloat32, lanesSum, comm,
                         nullptr) != lanesSuccess)
        return false;
    return true;
  };
  if (!allReduces()) return fail("allreduce", comm);
  for (int i = 0; i < calls; ++i)
    if (lanesBroadcast(ints.data(), ints.data(), ints.size(), lanesInt32, 0, comm, nullptr) !=
        lanesSuccess)
      return fail("broadcast", comm);
  std::ofstream(dir + "/ready1." + std::to_string(rank)) << "1\n";
  if (!waitForFile(dir + "/go", 120)) return fail("no go from the test", comm);
  if (!allReduces()) return fail("allreduce", comm);
  std::ofstream(dir + "/ready2." + std::to_string(rank)) << "1\n";
  if (!waitForFile(dir + "/finish", 120)) return fail("no finish from the test", comm);
  if (lanesCommDestroy(comm) != lanesSuccess) return fail("destroy", nullptr);
  return 0;
}
