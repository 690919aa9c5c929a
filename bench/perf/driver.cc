#include "perf/driver.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "perf/args.h"
#include "perf/memory.h"
#include "perf/rank_run.h"
#include "perf/run_env.h"

namespace lanes::perf {
namespace {

bool launchedByLauncher() {
  auto has = [](const char* n) { return std::getenv(n) != nullptr; };
  return has("LANES_RANK") || (has("RANK") && has("WORLD_SIZE")) || has("OMPI_COMM_WORLD_RANK") ||
         (has("SLURM_PROCID") && has("SLURM_STEP_ID")) || mpiLaunchWithoutRoot();
}

std::string baseName(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

// The local rank a launcher gives this process (its GPU is local rank % GPUs).
int localRankFromEnv() {
  int local = launchLocalRank();
  if (local >= 0) return local;
  LaunchEnv env;
  return readLaunchEnv(&env) ? std::max(env.rank, 0) : 0;
}

// Header notes for flags that are parsed but change nothing here.
std::string flagNotes(const PerfArgs& a, bool device) {
  std::string n;
  if (!a.ignoredFlags.empty()) {
    std::string list;
    for (const auto& f : a.ignoredFlags) list += (list.empty() ? "" : ", ") + f;
    n += "# Note: " + list +
         ": nccl-tests flags for NCCL's init, registration, CTA and device-API options and "
         "its reports; parsed, no effect here.\n";
  }
  if (a.streamNull && !device) n += "# Note: -y 1 has no effect on host memory (no stream).\n";
  if (a.timeoutSeconds > 0) {
    n += "# Timeout: LANES_TIMEOUT=" + std::to_string(a.timeoutSeconds) +
         " (from -T); NCCL calls have no such bound.\n";
  }
  if (a.reportCpuTime) {
    n += "# -C 1: the time columns are the CPU time to enqueue (rank-local); bandwidths use the "
         "completed time.\n";
  }
  return n;
}

// One rank per process, started by a launcher: its rank and GPU from the
// launcher, the communicator from the environment or over MPI.
int runLaunched(const PerfArgs& args, const CollSpec& spec, const RunSetup& setup, bool device,
                int gpus, const std::string& prog) {
  if (device) {
    // The communicator takes the thread's current GPU at init.
    Status st = selectGpu(gpuForRank(localRankFromEnv(), gpus));
    if (!st) {
      std::fprintf(stderr, "%s: %s\n", prog.c_str(), st.message().c_str());
      return 1;
    }
  }
  lanesComm_t comm = nullptr;
  lanesResult_t r = lanesCommInitFromEnv(&comm, nullptr);
  if (r != lanesSuccess) {
    std::fprintf(stderr, "%s: lanesCommInitFromEnv failed: %s: %s\n", prog.c_str(),
                 lanesGetErrorString(r), lanesGetLastError(nullptr));
    return 1;
  }
  int rc = RankRun(args, spec, comm, setup).run();
  lanesCommDestroy(comm);
  return rc;
}

}  // namespace

int perfMain(int argc, char** argv, const CollSpec& spec) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string prog = baseName(argv[0]);
  PerfArgs args;
  ParseResult parsed = parsePerfArgs(std::vector<std::string>(argv + 1, argv + argc), &args);
  if (!parsed.ok) {
    std::fprintf(stderr, "%s: %s\n", prog.c_str(), parsed.error.c_str());
    return 2;
  }
  if (args.help) {
    std::printf("USAGE: %s [options]\n%s", prog.c_str(), perfUsage());
    return 0;
  }
  // Before any CUDA call: several ranks' streams on one GPU need more
  // hardware queues than CUDA's default 8 (docs/gpu_data_path.md).
  requestDeviceConnections(args.nThreads * args.nGpus);
  // -T: the library's bound on every wait, read at communicator init.
  if (args.timeoutSeconds > 0)
    setenv("LANES_TIMEOUT", std::to_string(args.timeoutSeconds).c_str(), 1);

  RunSetup setup;
  setup.tool = prog;
  setup.command = commandLine(argc, argv);
  const char* corrupt = std::getenv("LANES_PERF_CORRUPT");
  setup.corrupt = corrupt != nullptr && std::strcmp(corrupt, "1") == 0;
  const bool cudaBuilt = deviceMemoryBuilt();
  const int gpus = cudaBuilt && args.memory != Memory::Host ? visibleGpus() : 0;
  setup.memory = resolveMemory(args.memory, cudaBuilt, gpus);
  const bool wantNccl = args.backend == Backend::Nccl || args.compare;
  if (wantNccl && setup.memory != Memory::Device) {
    std::fprintf(
        stderr,
        "%s: %s needs device memory (NCCL takes device buffers only), and %s; run it "
        "on a GPU machine.\n",
        prog.c_str(), args.compare ? "--compare nccl" : "--backend nccl",
        cudaBuilt ? "this process sees no CUDA device" : "this build has no CUDA data path");
    return 2;
  }
  if (setup.memory == Memory::Device && !cudaBuilt) {
    std::fprintf(stderr,
                 "%s: --memory device needs the CUDA data path, which this build does not have "
                 "(nvcc was not found or LANES_ENABLE_CUDA=OFF); use --memory host.\n",
                 prog.c_str());
    return 2;
  }
  if (setup.memory == Memory::Device && gpus == 0) {
    std::fprintf(stderr,
                 "%s: --memory device, but this process sees no CUDA device (check "
                 "CUDA_VISIBLE_DEVICES and the driver); use --memory host.\n",
                 prog.c_str());
    return 2;
  }
  const bool device = setup.memory == Memory::Device;
  setup.bounds = device ? args.bounds != 0 : args.bounds == 1;
  if (!device && args.graphLaunches > 0) {
    setup.note += "# -G: CUDA Graphs need --memory device; timing without graphs.\n";
  }
  setup.note += flagNotes(args, device);

  if (launchedByLauncher()) {
    if (args.nThreads * args.nGpus != 1) {
      std::fprintf(stderr,
                   "%s: -t/-g ranks per process are not supported under a launcher; start one "
                   "rank per process (lanes-run -n N) or run without a launcher.\n",
                   prog.c_str());
      return 2;
    }
    return runLaunched(args, spec, setup, device, gpus, prog);
  }

  // No launcher: nccl-tests' -t threads x -g GPUs per thread, one thread per
  // rank here. On device memory rank r uses GPU r % (visible GPUs), so more
  // ranks than GPUs share them.
  const int n = args.nThreads * args.nGpus;
  setup.nThreads = args.nThreads;
  setup.nGpus = args.nGpus;
  setup.threadRanks = true;
  std::vector<int> devlist;
  if (device) {
    for (int r = 0; r < n; ++r) devlist.push_back(gpuForRank(r, gpus));
    if (n > gpus) {
      setup.note += "# Note: " + std::to_string(n) + " ranks on " + std::to_string(gpus) +
                    " visible GPU(s): rank r uses GPU r % " + std::to_string(gpus) +
                    "; ranks sharing a GPU share its PCIe link (NCCL refuses this; Lanes "
                    "allows it).\n";
    }
  }
  std::vector<lanesComm_t> comms(n, nullptr);
  lanesResult_t r = lanesCommInitAll(comms.data(), n, device ? devlist.data() : nullptr);
  if (r != lanesSuccess) {
    std::fprintf(stderr, "%s: lanesCommInitAll(%d) failed: %s: %s\n", prog.c_str(), n,
                 lanesGetErrorString(r), lanesGetLastError(nullptr));
    return 1;
  }
  std::vector<int> rcs(n, 0);
  {
    std::vector<std::jthread> threads;
    for (int i = 1; i < n; ++i) {
      threads.emplace_back([&, i] { rcs[i] = RankRun(args, spec, comms[i], setup).run(); });
    }
    rcs[0] = RankRun(args, spec, comms[0], setup).run();
  }
  for (lanesComm_t c : comms) lanesCommDestroy(c);
  return *std::max_element(rcs.begin(), rcs.end());
}

}  // namespace lanes::perf
