// WakeFd: an eventfd that one thread signals to wake another sleeping in
// poll() on it.
#pragma once

namespace lanes {

class WakeFd {
 public:
  WakeFd();
  ~WakeFd();
  WakeFd(const WakeFd&) = delete;
  WakeFd& operator=(const WakeFd&) = delete;
  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  void signal() const;
  // Resets the counter, so that the next poll() sleeps again.
  void drain() const;

 private:
  int fd_ = -1;
};

}  // namespace lanes
