#include "transport/shm/stale_segments.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <memory>

#include "base/log.h"

namespace lanes {
namespace {

constexpr const char* kShmDir = "/dev/shm";

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

// Removes `name` if it is stale; returns its size then, else -1.
long long removeAndSize(const std::string& name, std::chrono::seconds minAge) {
  const std::string path = std::string(kShmDir) + "/" + name;
  // O_NOFOLLOW: a link planted in /dev/shm is not a segment; O_NONBLOCK: nor
  // is a FIFO, whose open would wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -1;  // gone meanwhile, or another user's
  long long size = -1;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
      std::time(nullptr) - st.st_mtime >= minAge.count() && ::flock(fd, LOCK_EX | LOCK_NB) == 0) {
    // The name may have been removed and made anew since it was opened:
    // unlink it only while it still names the file checked here.
    struct stat now {};
    if (::lstat(path.c_str(), &now) == 0 && now.st_ino == st.st_ino && now.st_dev == st.st_dev &&
        ::unlink(path.c_str()) == 0) {
      size = static_cast<long long>(st.st_blocks) * 512;
    }
  }
  ::close(fd);
  return size;
}

}  // namespace

StaleSegments removeStaleSegments(const std::string& prefix, std::chrono::seconds minAge) {
  StaleSegments out;
  std::unique_ptr<DIR, DirCloser> dir(::opendir(kShmDir));
  if (!dir) return out;
  while (const dirent* e = ::readdir(dir.get())) {
    const std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const long long bytes = removeAndSize(name, minAge);
    if (bytes < 0) continue;
    ++out.removed;
    out.bytes += static_cast<size_t>(bytes);
  }
  return out;
}

bool removeIfStale(const std::string& name) {
  return removeAndSize(name, std::chrono::seconds(0)) >= 0;
}

void removeStaleSegmentsAndWarn(int rank, const std::string& prefix, std::chrono::seconds minAge) {
  const StaleSegments s = removeStaleSegments(prefix, minAge);
  if (s.removed == 0) return;
  LANES_WARN(Transport, rank,
             "removed %d shared-memory segment(s) from /dev/shm (%zu MiB) that Lanes processes "
             "which died before finishing their init had left there",
             s.removed, (s.bytes + (size_t{1} << 20) - 1) >> 20);
}

}  // namespace lanes
