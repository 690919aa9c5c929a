// Stale segments: /dev/shm names that a process which died between creating
// a segment and unlinking it (SIGKILL, the OOM killer, a crash during init)
// left behind. Their pages stay allocated until someone removes the name, so
// a host that restarts crashed jobs would slowly fill /dev/shm.
//
// Liveness comes from the kernel, not from process ids: a segment's creator
// holds a shared flock on it for as long as it holds the segment
// (ShmSegment::create), and the kernel drops the lock when the last
// descriptor of the creating process closes, however it died. A name that
// nobody locks is stale. This also holds across containers and PID
// namespaces that share /dev/shm, where a process id would mislead.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace lanes {

struct StaleSegments {
  int removed = 0;
  size_t bytes = 0;  // what the removed segments held
};

// Removes every /dev/shm entry whose name starts with `prefix`, that belongs
// to this user, was last modified longer than `minAge` ago (a creator locks
// its segment right after creating it; the age covers that step; creating
// and reserving set the time) and that no process locks.
StaleSegments removeStaleSegments(const std::string& prefix, std::chrono::seconds minAge);

// The sweep communicator init runs on every Lanes name ("lanes-"), with a
// warning that says what was removed.
void removeStaleLanesSegments(int rank);

}  // namespace lanes
