#include "topology/probe_first_use.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>
#include <utility>

#include "base/deadline.h"
#include "topology/probe.h"

namespace lanes::topo {
namespace {

constexpr double kFileLockSeconds = 10;  // a writer holds it for a read and a rename

// An exclusive flock on `path`, released (with the descriptor) at scope end.
// The lock file stays: removing it would let a waiter lock an unlinked file.
class CacheLock {
 public:
  CacheLock() = default;
  CacheLock(const CacheLock&) = delete;
  CacheLock& operator=(const CacheLock&) = delete;
  ~CacheLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }

  // `holder` says what the process holding it does, for the timeout's error.
  Status take(const std::string& path, double seconds, const char* holder) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) return systemError("cannot open " + path + ": " + std::strerror(errno));
    const Deadline deadline = Deadline::after(seconds);
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR)
        return systemError("cannot lock " + path + ": " + std::strerror(errno));
      if (deadline.expired())
        return timeoutError(std::string("another process has ") + holder + " for over " +
                            std::to_string(static_cast<int>(seconds)) + " s (it holds " + path +
                            "; `fuser " + path + "` names it)");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return Status::ok();
  }

 private:
  int fd_ = -1;
};

}  // namespace

std::string firstUseLockPath(const std::string& cachePath, const Topology& t) {
  std::string host = t.hostname.empty() ? "host" : t.hostname;
  for (char& c : host)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') c = '_';
  return cachePath + "." + host + ".lock";
}

Status probeAtFirstUse(const FirstUseProbe& p, Topology* t, FirstUseResult* result) {
  *result = FirstUseResult::NoCache;
  if (p.cachePath.empty()) return Status::ok();
  CacheLock lock;
  LANES_RETURN_IF_ERROR(
      lock.take(firstUseLockPath(p.cachePath, *t), p.lockSeconds, "measured this machine"));
  // Whoever held the lock before may have measured this very machine.
  if (loadCachedProbes(p.cachePath, t)) {
    *result = FirstUseResult::Cached;
    return Status::ok();
  }
  Topology measured = *t;
  LANES_RETURN_IF_ERROR(p.measure(&measured));
  t->probes = std::move(measured.probes);
  *result = FirstUseResult::Measured;
  // The file holds every machine's entry: writers of other machines (a
  // shared home directory) take turns on it, each for a read and a rename.
  CacheLock file;
  LANES_RETURN_IF_ERROR(
      file.take(p.cachePath + ".lock", kFileLockSeconds, "been writing the probe cache"));
  return saveCachedProbes(p.cachePath, *t);
}

}  // namespace lanes::topo
