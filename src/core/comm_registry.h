// Live communicator handles, so a call with a destroyed or foreign handle
// gets lanesInvalidArgument instead of touching freed memory, and so
// lanesCommAbort from another thread never frees a communicator under a
// call that is still running on it.
#pragma once

#include <vector>

#include "lanes/lanes.h"

namespace lanes {

void registerComm(lanesComm_t comm);

// Holds a communicator in use for the length of one API call.
class CommRef {
 public:
  explicit CommRef(lanesComm_t comm);  // empty if comm is not live
  ~CommRef();
  CommRef(const CommRef&) = delete;
  CommRef& operator=(const CommRef&) = delete;
  explicit operator bool() const { return comm_ != nullptr; }
  lanesComm_t get() const { return comm_; }
  lanesComm_t operator->() const { return comm_; }

 private:
  lanesComm_t comm_ = nullptr;
};

// The live handles now (take a CommRef on each before use: it may be
// retired meanwhile).
std::vector<lanesComm_t> liveComms();

// Removes the handle from the registry (later calls fail cleanly) and waits
// until calls still inside it have returned. Returns false if it was not live.
bool retireComm(lanesComm_t comm);

}  // namespace lanes
