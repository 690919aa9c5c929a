#include "transport/socket/zero_copy.h"

#include <linux/errqueue.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "base/status.h"

namespace lanes {
namespace {

// Whether `a` comes before `b` in the kernel's 32-bit numbering, which wraps.
bool before(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) < 0; }

}  // namespace

bool ZeroCopySends::enable(int fd, size_t minBytes, std::string* why) {
  minBytes_ = minBytes;
  on_ = false;
  if (minBytes == 0) return true;
  const int one = 1;
  if (::setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)) != 0) {
    *why = "setsockopt(SO_ZEROCOPY) failed: " + errnoText(errno);
    return false;
  }
  on_ = true;
  return true;
}

void ZeroCopySends::complete(uint32_t lo, uint32_t hi) {
  ahead_.emplace_back(lo, hi);
  for (bool moved = true; moved;) {
    moved = false;
    for (auto it = ahead_.begin(); it != ahead_.end();) {
      if (before(completeBelow_, it->first)) {
        ++it;
        continue;
      }
      if (before(completeBelow_, it->second + 1)) completeBelow_ = it->second + 1;
      it = ahead_.erase(it);
      moved = true;
    }
  }
}

Status ZeroCopySends::reap(int fd) {
  for (;;) {
    alignas(cmsghdr) char control[256];
    msghdr msg{};
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    if (::recvmsg(fd, &msg, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::ok();
      return systemError("reading MSG_ZEROCOPY reports failed: " + errnoText(errno));
    }
    if (msg.msg_flags & MSG_CTRUNC) return systemError("a MSG_ZEROCOPY report was cut short");
    for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
      const bool ipError = (cm->cmsg_level == SOL_IP && cm->cmsg_type == IP_RECVERR) ||
                           (cm->cmsg_level == SOL_IPV6 && cm->cmsg_type == IPV6_RECVERR);
      if (!ipError) continue;
      sock_extended_err err;
      std::memcpy(&err, CMSG_DATA(cm), sizeof(err));
      if (err.ee_origin != SO_EE_ORIGIN_ZEROCOPY || err.ee_errno != 0)
        return systemError("the socket's error queue holds an error: " +
                           errnoText(static_cast<int>(err.ee_errno)));
      complete(err.ee_info, err.ee_data);
      if ((err.ee_code & SO_EE_CODE_ZEROCOPY_COPIED) == 0) {
        copiedInARow_ = 0;
        continue;
      }
      ++copied_;
      if (++copiedInARow_ >= kCopiedReportsBeforeOff && on_) {
        on_ = false;
        copiedOff_ = true;
      }
    }
  }
}

}  // namespace lanes
