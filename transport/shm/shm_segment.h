// ShmSegment: one POSIX shared-memory object, its descriptor and its mapping,
// released by RAII. The creator also owns the name until it unlinks it (or
// hands it over, keepName), so a failed creation never leaves a segment
// behind in /dev/shm. A name appears
// only once its segment is sized, reserved and initialised: a peer that
// finds it may use it at once.
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

  // Creates `name` (mode 0600; an existing one that no process locks is an
  // earlier run's and is replaced), holds a shared flock on it (the sign of a
  // live creator, stale_segments.h), reserves `bytes` of /dev/shm with
  // posix_fallocate (so a small /dev/shm fails here, not with SIGBUS later),
  // and maps it. `neededTotal` is what the whole communicator needs on this
  // host, quoted when /dev/shm is too small.
  // `beforeReserve`, when set, runs on the fresh mapping before any page is
  // allocated: a memory policy it sets (mbind, NUMA placement) decides where
  // the reserved pages go. `initialise`, when set, runs on the reserved
  // mapping before the name appears.
  // The segment is built under `name`.new and then renamed to `name`
  // without replacing, so no other process ever sees it half made.
  using BeforeReserve = std::function<void(void* base, size_t bytes)>;
  using Initialise = std::function<void(void* base, size_t bytes)>;
  static Status create(const std::string& name, size_t bytes, size_t neededTotal, ShmSegment* out,
                       const BeforeReserve& beforeReserve = {}, const Initialise& initialise = {});
  // Opens and maps a segment another process created; checks its size
  // (`bytes` 0: takes the size it has).
  static Status open(const std::string& name, size_t bytes, ShmSegment* out);
  // open(), except that a name that does not exist (yet) is no error:
  // *present says whether it did.
  static Status openIfPresent(const std::string& name, ShmSegment* out, bool* present);

  // Maps every page of the segment into this process now (populatePages),
  // rather than a fault per page at its first touch; best effort. For a
  // segment about to be used whole: the faults were a large part of why a
  // fresh pair's first pass over its rings ran several times slower than
  // later ones (bench/results/shm_cold_start).
  void mapAllPages();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  // Removes the name if this process created it, and the descriptor with
  // it; the mappings stay valid. Idempotent.
  void unlink();
  // Leaves the name in place at teardown, for a peer that has yet to map
  // the segment and removes it then; once unlocked, the stale sweep spares
  // it for its minimum age from now.
  void keepName();
  // Removes the name whoever created it: for the last process to map a
  // segment, so the name goes as soon as every user holds the mapping.
  void removeName();
  void reset();

 private:
  std::string name_;
  int fd_ = -1;
  void* data_ = nullptr;
  size_t size_ = 0;
  bool ownsName_ = false;
};

// Bytes free in /dev/shm (SIZE_MAX if it cannot be told).
size_t devShmFreeBytes();
// The error for a /dev/shm with `freeBytes` free where `neededTotal` is
// needed: both figures, /dev/shm's size and the ways out.
Status devShmNoSpace(size_t freeBytes, size_t neededTotal);

}  // namespace lanes
