#include "base/wake_fd.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

namespace lanes {

WakeFd::WakeFd() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

WakeFd::~WakeFd() {
  if (fd_ >= 0) ::close(fd_);
}

void WakeFd::signal() const {
  uint64_t one = 1;
  ssize_t n = ::write(fd_, &one, sizeof(one));
  (void)n;  // a full counter already wakes the poll
}

void WakeFd::drain() const {
  uint64_t value = 0;
  ssize_t n = ::read(fd_, &value, sizeof(value));
  (void)n;  // nothing to read: already drained
}

}  // namespace lanes
