// Stale segments: /dev/shm names that a process which died between creating
// a segment and unlinking it (SIGKILL, the OOM killer, a crash during init)
// left behind. Their pages stay allocated until someone removes the name, so
// a host that restarts crashed jobs would slowly fill /dev/shm.
//
// Liveness comes from the kernel, not from process ids: a segment's creator
// holds a shared flock on it for as long as it holds the segment
// (ShmSegment::create). The lock belongs to the open file description, so it
// drops when the last descriptor sharing it closes (the creator's, or a
// forked child's that inherited it), however the process died. A name that
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

// Removes every /dev/shm entry whose name starts with `prefix`, that is a
// regular file of this user, was last modified longer than `minAge` ago (a
// creator locks its segment right after creating it; the age covers that
// step; creating and reserving set the time) and that no process locks.
StaleSegments removeStaleSegments(const std::string& prefix, std::chrono::seconds minAge);

// The same for one name (without the leading '/'), whatever its age: for a
// creator whose own name exists already, left by an earlier run of the same
// job (a restart reuses the communicator id, so its names too).
bool removeIfStale(const std::string& name);

// removeStaleSegments, then a warning that says what was removed. Init runs
// it on every Lanes name: prefix "lanes-", 10 s.
void removeStaleSegmentsAndWarn(int rank, const std::string& prefix, std::chrono::seconds minAge);
inline constexpr std::chrono::seconds kStaleMinAge{10};

}  // namespace lanes
