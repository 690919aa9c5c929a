// MSG_ZEROCOPY on one data socket: which payloads the kernel sends from the
// caller's pages instead of copying them, and when it is done with them.
//
// The kernel numbers every send made with MSG_ZEROCOPY on a socket (0, 1, ...)
// and reports finished ranges of those numbers on the socket's error queue;
// until then the pages must not change. Where it had to copy after all
// (loopback, a device without scatter-gather, a route through a namespace's
// veth) it says so, and the socket goes back to plain sends: pinning pages
// only to have them copied costs more than the copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace lanes {

class ZeroCopySends {
 public:
  // Completion reports that said "copied" in a row before the socket stops
  // asking for zero-copy.
  static constexpr int kCopiedReportsBeforeOff = 4;

  // Asks the kernel for zero-copy sends of payloads of at least `minBytes`
  // on `fd` (0: never). False where the kernel refuses (too old, or not a
  // TCP socket); `why` says so.
  bool enable(int fd, size_t minBytes, std::string* why);
  // Whether a payload of `bytes` should go with MSG_ZEROCOPY now.
  bool wants(size_t bytes) const { return on_ && minBytes_ > 0 && bytes >= minBytes_; }
  // A send with MSG_ZEROCOPY was accepted (returned > 0): its number.
  uint32_t accepted() { return next_++; }
  // No send awaits its report.
  bool idle() const { return completeBelow_ == next_; }
  // Every send numbered `id` or lower is reported done.
  bool done(uint32_t id) const { return static_cast<int32_t>(id - completeBelow_) < 0; }
  // The number of the last accepted send (meaningful once one was).
  uint32_t last() const { return next_ - 1; }
  // Reads the reports waiting on the error queue of `fd`. Error where the
  // queue holds something else (a socket error), with its text.
  Status reap(int fd);
  // The kernel reported copies kCopiedReportsBeforeOff times in a row, and
  // the socket no longer asks for zero-copy.
  bool turnedOffByCopies() const { return copiedOff_; }
  uint64_t sends() const { return next_; }
  uint64_t copiedReports() const { return copied_; }

 private:
  void complete(uint32_t lo, uint32_t hi);

  bool on_ = false;
  bool copiedOff_ = false;
  size_t minBytes_ = 0;
  uint32_t next_ = 0;           // the next send's number
  uint32_t completeBelow_ = 0;  // every number below is reported
  // Reported ranges above completeBelow_ (the kernel may report out of order).
  std::vector<std::pair<uint32_t, uint32_t>> ahead_;
  int copiedInARow_ = 0;
  uint64_t copied_ = 0;
};

}  // namespace lanes
