#include "transport/shm/shm_segment.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>
#include <utility>

#include "base/populate_pages.h"
#include "transport/shm/stale_segments.h"

namespace lanes {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// glibc's shm_open keeps POSIX shared memory as files in /dev/shm.
std::string devShmPath(const std::string& name) {
  return "/dev/shm/" + name.substr(name.starts_with('/') ? 1 : 0);
}

std::string devShmSizeText() {
  struct statvfs vfs {};
  if (::statvfs("/dev/shm", &vfs) != 0) return "";
  size_t total = static_cast<size_t>(vfs.f_blocks) * vfs.f_frsize;
  return " (of " + std::to_string((total + kMiB - 1) / kMiB) + " MiB)";
}

// A name that exists already was left by an earlier run of the same job (a
// restart reuses the communicator id) unless a process still locks it; it is
// reclaimed then. A concurrent sweep may hold it for a moment: retried.
// `attempt` creates or renames into `name`, -1 with errno EEXIST where it
// exists already.
template <typename Attempt>
int reclaimingStale(const std::string& name, Attempt attempt) {
  for (int tries = 0;; ++tries) {
    const int rc = attempt();
    if (rc >= 0 || errno != EEXIST || tries == 3) return rc;
    if (!removeIfStale(name.substr(name.starts_with('/') ? 1 : 0)))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Status nameTaken(const std::string& name, int err, const char* call) {
  return systemError(std::string(call) + "(" + name + ") failed: " + errnoText(err) +
                     (err == EEXIST ? "; a live process holds this name (a job with the same "
                                      "communicator id on this host), or another user left it "
                                      "in /dev/shm"
                                    : ""));
}

// Creates `name` exclusively and takes the shared flock that marks a live
// creator (stale_segments.h). Until the lock is held the file looks stale, and
// a sweep may remove it: then the name no longer leads to this file, and it is
// made again.
Status createLocked(const std::string& name, int* fdOut) {
  for (int tries = 0;; ++tries) {
    const int fd = reclaimingStale(
        name, [&] { return ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600); });
    if (fd < 0) return nameTaken(name, errno, "shm_open");
    if (::flock(fd, LOCK_SH) != 0) {
      const int err = errno;
      ::close(fd);
      return systemError("flock(" + name + ") failed: " + errnoText(err));
    }
    struct stat mine {
    }, named{};
    if (::fstat(fd, &mine) == 0 && ::stat(devShmPath(name).c_str(), &named) == 0 &&
        mine.st_ino == named.st_ino && mine.st_dev == named.st_dev) {
      *fdOut = fd;
      return Status::ok();
    }
    ::close(fd);
    if (tries == 3) return systemError("shm_open(" + name + "): the new file was removed at once");
  }
}

}  // namespace

// Containers often get a 64 MiB /dev/shm: say so, and both ways out.
Status devShmNoSpace(size_t freeBytes, size_t neededTotal) {
  return systemError("/dev/shm has " + std::to_string(freeBytes / kMiB) + " MiB free" +
                     devShmSizeText() + " but this communicator needs " +
                     std::to_string((neededTotal + kMiB - 1) / kMiB) +
                     " MiB of shared memory on this host; enlarge /dev/shm (docker run "
                     "--shm-size=1g, or mount -o remount,size=1G /dev/shm), lower "
                     "LANES_SHM_BUDGET / LANES_SHM_RING_BYTES / LANES_STAGE_SLOTS, or set "
                     "LANES_SHM_DISABLE=1 to use TCP between local ranks");
}

size_t devShmFreeBytes() {
  struct statvfs vfs {};
  if (::statvfs("/dev/shm", &vfs) != 0) return SIZE_MAX;  // unknown: let fallocate decide
  return static_cast<size_t>(vfs.f_bavail) * vfs.f_frsize;
}

ShmSegment& ShmSegment::operator=(ShmSegment&& o) noexcept {
  if (this != &o) {
    reset();
    name_ = std::move(o.name_);
    fd_ = std::exchange(o.fd_, -1);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    ownsName_ = std::exchange(o.ownsName_, false);
  }
  return *this;
}

void ShmSegment::unlink() {
  if (ownsName_) {
    ::shm_unlink(name_.c_str());
    ownsName_ = false;
    // The descriptor only held the lock that guards the name from the stale
    // sweep; the mapping keeps the segment.
    if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  }
}

void ShmSegment::keepName() {
  // The stale sweep judges an unlocked name by its age: the time of handing
  // it over counts, not of creating it.
  if (ownsName_ && fd_ >= 0) ::futimens(fd_, nullptr);
  ownsName_ = false;
}

void ShmSegment::removeName() {
  if (!name_.empty()) ::shm_unlink(name_.c_str());
  ownsName_ = false;
}

void ShmSegment::mapAllPages() {
  if (data_ != nullptr) populatePages(data_, size_);
}

void ShmSegment::reset() {
  unlink();
  if (data_ != nullptr) ::munmap(data_, size_);
  if (fd_ >= 0) ::close(fd_);
  data_ = nullptr;
  fd_ = -1;
  size_ = 0;
}

Status ShmSegment::create(const std::string& name, size_t bytes, size_t neededTotal,
                          ShmSegment* out, const BeforeReserve& beforeReserve,
                          const Initialise& initialise) {
  ShmSegment seg;
  // Checked first: fallocate on a tmpfs without a size limit would try to
  // take the memory rather than fail.
  size_t freeBytes = devShmFreeBytes();
  if (bytes > freeBytes) return devShmNoSpace(freeBytes, neededTotal);

  // Built under a name of its own; the same prefix, so a creator that dies
  // half-way leaves something the stale sweep removes.
  seg.name_ = name + ".new";
  LANES_RETURN_IF_ERROR(createLocked(seg.name_, &seg.fd_));
  seg.ownsName_ = true;
  // Size (no pages yet), map, let the caller set a memory policy on the
  // mapping, then reserve: tmpfs allocates the pages in fallocate, following
  // the file's policy, and a full /dev/shm still fails here, not with SIGBUS.
  if (::ftruncate(seg.fd_, static_cast<off_t>(bytes)) != 0) {
    return systemError("ftruncate(" + name + ", " + std::to_string(bytes) +
                       ") failed: " + errnoText(errno));
  }
  seg.data_ = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, seg.fd_, 0);
  if (seg.data_ == MAP_FAILED) {
    seg.data_ = nullptr;
    return systemError("mmap of " + name + " (" + std::to_string(bytes) +
                       " bytes) failed: " + errnoText(errno));
  }
  seg.size_ = bytes;
  if (beforeReserve) beforeReserve(seg.data_, bytes);
  int err = ::posix_fallocate(seg.fd_, 0, static_cast<off_t>(bytes));
  if (err == ENOSPC) return devShmNoSpace(devShmFreeBytes(), neededTotal);
  if (err != 0) {
    return systemError("posix_fallocate(" + name + ", " + std::to_string(bytes) +
                       ") failed: " + errnoText(err));
  }
  if (initialise) initialise(seg.data_, bytes);
  const std::string from = devShmPath(seg.name_);
  const std::string to = devShmPath(name);
  if (reclaimingStale(name, [&] {
        return ::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE);
      }) != 0)
    return nameTaken(name, errno, "rename to");
  seg.name_ = name;
  *out = std::move(seg);
  return Status::ok();
}

Status ShmSegment::open(const std::string& name, size_t bytes, ShmSegment* out) {
  bool present = false;
  LANES_RETURN_IF_ERROR(openIfPresent(name, out, &present));
  if (!present) {
    return systemError("shm_open(" + name + ") of a peer's segment failed: " + errnoText(ENOENT));
  }
  if (bytes != 0 && out->size() != bytes) {
    const size_t found = out->size();
    out->reset();
    return systemError("shared-memory segment " + name + " has " + std::to_string(found) +
                       " bytes, expected " + std::to_string(bytes) +
                       "; LANES_SHM_RING_BYTES must be the same on every rank");
  }
  return Status::ok();
}

Status ShmSegment::openIfPresent(const std::string& name, ShmSegment* out, bool* present) {
  *present = false;
  ShmSegment seg;
  seg.name_ = name;
  seg.fd_ = ::shm_open(name.c_str(), O_RDWR, 0600);
  if (seg.fd_ < 0 && errno == ENOENT) return Status::ok();
  if (seg.fd_ < 0) {
    return systemError("shm_open(" + name + ") of a peer's segment failed: " + errnoText(errno));
  }
  struct stat st {};
  if (::fstat(seg.fd_, &st) != 0 || st.st_size <= 0) {
    return systemError("shared-memory segment " + name + " is empty or unreadable");
  }
  const auto bytes = static_cast<size_t>(st.st_size);
  seg.data_ = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, seg.fd_, 0);
  if (seg.data_ == MAP_FAILED) {
    seg.data_ = nullptr;
    return systemError("mmap of " + name + " failed: " + errnoText(errno));
  }
  seg.size_ = bytes;
  // The mapping keeps the segment; only its creator needs a descriptor (its lock).
  ::close(std::exchange(seg.fd_, -1));
  *present = true;
  *out = std::move(seg);
  return Status::ok();
}

}  // namespace lanes
