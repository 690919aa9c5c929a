// lanes_soak: thousands of random collectives, each checked, for a bounded
// time. Every rank seeds the same generator, so all draw the same sequence of
// (operation, communicator, datatype, reduction, size, root, in place). The
// communicators are the world and splits of it (and a split of a split), all
// on host memory. Rank 0 prints operations/s and the error count; any wrong
// byte or failed call ends the run with exit code 1.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "lanes/lanes.h"
#include "tests/multi/id_pipe.h"
#include "tests/soak/soak_ops.h"
#include "tests/soak/soak_options.h"
#include "tests/soak/soak_plan.h"

namespace lanes::soak {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Destroys the communicators in reverse order of creation.
class CommSet {
 public:
  ~CommSet() {
    for (auto it = comms_.rbegin(); it != comms_.rend(); ++it)
      if (*it != nullptr) lanesCommDestroy(*it);
  }
  void add(lanesComm_t c) { comms_.push_back(c); }
  lanesComm_t operator[](size_t i) const { return comms_[i]; }
  size_t size() const { return comms_.size(); }

 private:
  std::vector<lanesComm_t> comms_;
};

bool split(lanesComm_t parent, int color, int key, CommSet* set, int rank) {
  lanesComm_t c = nullptr;
  lanesResult_t res = lanesCommSplit(parent, color, key, &c, nullptr);
  if (res != lanesSuccess || c == nullptr) {
    std::fprintf(stderr, "[soak] rank %d: lanesCommSplit failed: %s\n", rank,
                 lanesGetLastError(parent));
    return false;
  }
  set->add(c);
  return true;
}

// Runs the soak on `world` (taken over); returns the process exit code.
int runRank(lanesComm_t world, const SoakOptions& opt) {
  CommSet comms;
  comms.add(world);
  int rank = 0, n = 0;
  lanesCommUserRank(world, &rank);
  lanesCommCount(world, &n);
  // World, odd/even halves, the world in reverse order, and halves of the
  // halves: sizes and rank orders differ between communicators.
  if (!split(world, rank % 2, rank, &comms, rank) || !split(world, 0, n - rank, &comms, rank))
    return 1;
  int halfRank = 0;
  lanesCommUserRank(comms[1], &halfRank);
  if (!split(comms[1], halfRank / 2, halfRank, &comms, rank)) return 1;

  OpPlanner planner(opt.seed, static_cast<int>(comms.size()), opt.maxBytes);
  std::array<uint64_t, static_cast<size_t>(OpKind::kCount)> perKind{};
  uint64_t ops = 0, bytes = 0;
  const auto start = Clock::now();
  for (;;) {
    // Every 16 operations all ranks agree whether time is up (max of flags).
    if (ops % 16 == 0) {
      int32_t done = since(start) >= opt.seconds ? 1 : 0, any = 0;
      lanesResult_t res = lanesAllReduce(&done, &any, 1, lanesInt32, lanesMax, world, nullptr);
      if (res != lanesSuccess) {
        std::fprintf(stderr, "[soak] rank %d: the stop vote failed: %s\n", rank,
                     lanesGetLastError(world));
        return 1;
      }
      if (any != 0) break;
    }
    OpSpec op = planner.next();
    lanesComm_t comm = comms[static_cast<size_t>(op.comm)];
    if (opt.verbose && rank == 0) std::printf("[soak] %s\n", describe(op, -1).c_str());
    std::string problem = runAndCheck(op, comm);
    if (!problem.empty()) {
      std::fprintf(stderr, "[soak] rank %d: error after %llu good operations (seed %llu): %s\n",
                   rank, static_cast<unsigned long long>(ops),
                   static_cast<unsigned long long>(opt.seed), problem.c_str());
      return 1;
    }
    ++ops;
    ++perKind[static_cast<size_t>(op.kind)];
    bytes += op.count * test::typeSize(op.type);
  }
  const double took = since(start);
  if (rank == 0) {
    std::printf(
        "[soak] %d ranks, %zu communicators, seed %llu, max %zu bytes: %llu operations in %.1f s "
        "(%.0f ops/s per rank, %.1f MB/s of per-rank buffers), 0 errors\n",
        n, comms.size(), static_cast<unsigned long long>(opt.seed), opt.maxBytes,
        static_cast<unsigned long long>(ops), took, static_cast<double>(ops) / took,
        static_cast<double>(bytes) / took / 1e6);
    std::string kinds = "[soak] per operation:";
    for (size_t k = 0; k < perKind.size(); ++k)
      kinds += std::string(" ") + opKindName(static_cast<OpKind>(k)) + " " +
               std::to_string(perKind[k]) + ",";
    kinds.pop_back();
    std::printf("%s\n", kinds.c_str());
    std::fflush(stdout);
  }
  return 0;
}

// Without a launcher: N forked ranks around an id made here.
int forkRanks(const SoakOptions& opt) {
  // Ranks start once every fork is done, with an id made after them (IdPipe).
  test::IdPipe go;
  std::string error;
  if (!go.open(&error)) {
    std::fprintf(stderr, "[soak] %s\n", error.c_str());
    return 1;
  }
  std::fflush(stdout);
  std::vector<pid_t> pids;
  for (int r = 0; r < opt.ranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      lanesUniqueId id;
      if (!go.receive(&id)) _exit(1);  // the parent could not make an id
      lanesComm_t world = nullptr;
      if (lanesCommInitRank(&world, opt.ranks, id, r) != lanesSuccess) {
        std::fprintf(stderr, "[soak] rank %d: init failed: %s\n", r, lanesGetLastError(nullptr));
        _exit(1);
      }
      int rc = runRank(world, opt);
      std::fflush(stdout);
      _exit(rc);
    }
    if (pid < 0) {
      std::perror("[soak] fork");
      for (pid_t p : pids) kill(p, SIGKILL);
      return 1;
    }
    pids.push_back(pid);
  }
  lanesUniqueId id;
  const bool haveId = lanesGetUniqueId(&id) == lanesSuccess;
  if (!haveId)
    std::fprintf(stderr, "[soak] lanesGetUniqueId failed: %s\n", lanesGetLastError(nullptr));
  go.send(haveId ? &id : nullptr, pids.size());
  int failed = 0;
  for (pid_t p : pids) {
    int status = 0;
    waitpid(p, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  if (failed) std::fprintf(stderr, "[soak] %d of %d ranks failed\n", failed, opt.ranks);
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace lanes::soak

int main(int argc, char** argv) {
  using namespace lanes::soak;
  SoakOptions opt;
  std::string err = parseSoakOptions(argc, argv, &opt);
  if (err == "help") {
    std::printf("%s", soakUsage());
    return 0;
  }
  if (!err.empty()) {
    std::fprintf(stderr, "lanes_soak: %s\n%s", err.c_str(), soakUsage());
    return 2;
  }
  const bool launched = std::getenv("LANES_RANK") != nullptr ||
                        std::getenv("OMPI_COMM_WORLD_RANK") != nullptr ||
                        std::getenv("RANK") != nullptr;
  if (!launched) {
    if (opt.ranks == 0) {
      std::fprintf(stderr, "lanes_soak: not started by a launcher; give --ranks N\n%s",
                   soakUsage());
      return 2;
    }
    return forkRanks(opt);
  }
  lanesComm_t world = nullptr;
  if (lanesCommInitFromEnv(&world, nullptr) != lanesSuccess) {
    std::fprintf(stderr, "[soak] init from the launcher's environment failed: %s\n",
                 lanesGetLastError(nullptr));
    return 1;
  }
  int n = 0;
  lanesCommCount(world, &n);
  if (opt.ranks != 0 && opt.ranks != n) {
    std::fprintf(stderr, "[soak] --ranks %d but the launcher started %d ranks\n", opt.ranks, n);
    lanesCommDestroy(world);
    return 2;
  }
  return runRank(world, opt);
}
