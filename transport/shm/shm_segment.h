// ShmSegment: one POSIX shared-memory object, its descriptor and its mapping,
// released by RAII. The creator also owns the name until it unlinks it, so a
// failed connect never leaves a segment behind in /dev/shm.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "base/status.h"

namespace lanes {

class ShmSegment {
 public:
  ShmSegment() = default;
  ~ShmSegment() { reset(); }
  ShmSegment(ShmSegment&& o) noexcept { *this = std::move(o); }
  ShmSegment& operator=(ShmSegment&& o) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  // Creates `name` exclusively (mode 0600; an existing one that no process
  // locks is an earlier run's and is replaced), holds a shared flock on it
  // (the sign of a live creator, stale_segments.h), reserves `bytes` of /dev/shm with
  // posix_fallocate (so a small /dev/shm fails here, not with SIGBUS later),
  // and maps it. `neededTotal` is what the whole communicator needs on this
  // host, quoted when /dev/shm is too small.
  // `beforeReserve`, when set, runs on the fresh mapping before any page is
  // allocated: a memory policy it sets (mbind, NUMA placement) decides where
  // the reserved pages go.
  using BeforeReserve = std::function<void(void* base, size_t bytes)>;
  static Status create(const std::string& name, size_t bytes, size_t neededTotal, ShmSegment* out,
                       const BeforeReserve& beforeReserve = {});
  // Opens and maps a segment another process created; checks its size.
  static Status open(const std::string& name, size_t bytes, ShmSegment* out);

  void* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  // Removes the name; the mappings stay valid. Idempotent.
  void unlink();
  void reset();

 private:
  std::string name_;
  int fd_ = -1;
  void* data_ = nullptr;
  size_t size_ = 0;
  bool ownsName_ = false;
};

}  // namespace lanes
