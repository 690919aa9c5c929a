// An MPS control daemon of a test's own. Its pipe and log folders are private, so only
// processes that inherit the variables it sets join it; ranks forked while it lives run
// their kernels at once instead of taking time slices. It quits and its folders go when
// it goes out of scope.
#pragma once

#include <optional>
#include <string>

#include "tests/common/scoped_env.h"

namespace lanes::test {

class MpsDaemon {
 public:
  MpsDaemon();
  ~MpsDaemon();
  MpsDaemon(const MpsDaemon&) = delete;
  MpsDaemon& operator=(const MpsDaemon&) = delete;

  // Whether nvidia-cuda-mps-control is on PATH (else the test skips).
  static bool available();
  bool running() const { return error_.empty(); }
  // Why the daemon did not start.
  const std::string& error() const { return error_; }

 private:
  std::string dir_;
  std::string error_;
  std::optional<ScopedEnv> pipe_, log_, queues_;
};

}  // namespace lanes::test
