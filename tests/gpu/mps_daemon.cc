#include "tests/gpu/mps_daemon.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

extern char** environ;

namespace lanes::test {
namespace {

constexpr const char* kControl = "nvidia-cuda-mps-control";

// `nvidia-cuda-mps-control -d`: it forks the daemon and exits; its exit status.
int startControlDaemon() {
  char* argv[] = {const_cast<char*>(kControl), const_cast<char*>("-d"), nullptr};
  pid_t pid = 0;
  if (posix_spawnp(&pid, kControl, nullptr, nullptr, argv, environ) != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The daemon's commands come on the standard input of nvidia-cuda-mps-control.
void sendQuit() {
  if (FILE* pipe = popen(kControl, "w")) {
    std::fputs("quit\n", pipe);
    pclose(pipe);
  }
}

// Whether an MPS daemon or server of the pipe folder `pipe` still runs: they
// inherit the variable that names it.
bool mpsProcessesLeft(const std::string& pipe) {
  const std::string mark = "CUDA_MPS_PIPE_DIRECTORY=" + pipe;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    std::string comm;
    std::ifstream(entry.path() / "comm") >> comm;
    if (comm.rfind("nvidia-cuda-mps", 0) != 0) continue;
    std::ifstream environ(entry.path() / "environ");
    std::string var;
    while (std::getline(environ, var, '\0'))
      if (var == mark) return true;
  }
  return false;
}

}  // namespace

bool MpsDaemon::available() {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::filesystem::path candidate =
        std::filesystem::path(dirs.substr(start, end - start)) / kControl;
    if (access(candidate.c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

MpsDaemon::MpsDaemon() {
  char pattern[] = "/tmp/lanes-mps.XXXXXX";
  if (mkdtemp(pattern) == nullptr) {
    error_ = "mkdtemp failed";
    return;
  }
  dir_ = pattern;
  std::filesystem::create_directory(dir_ + "/pipe");
  std::filesystem::create_directory(dir_ + "/log");
  pipe_.emplace("CUDA_MPS_PIPE_DIRECTORY", (dir_ + "/pipe").c_str());
  log_.emplace("CUDA_MPS_LOG_DIRECTORY", (dir_ + "/log").c_str());
  // The clients of one GPU share one pool of hardware queues under MPS, and each
  // takes CUDA_DEVICE_MAX_CONNECTIONS of them: at 32, the H200's pool held two
  // clients; unset, sixteen (docs/gpu_data_path.md).
  queues_.emplace("CUDA_DEVICE_MAX_CONNECTIONS", std::nullopt);
  const int rc = startControlDaemon();
  if (rc != 0)
    error_ = std::string(kControl) + " -d exited with " + std::to_string(rc) + " (log: " + dir_ +
             "/log)";
}

MpsDaemon::~MpsDaemon() {
  if (dir_.empty()) return;
  if (running()) {
    // The daemon and its server quit once asked; wait for them to go, so that
    // the next test's contexts do not meet a server on its way out.
    sendQuit();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (mpsProcessesLeft(dir_ + "/pipe") && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

}  // namespace lanes::test
