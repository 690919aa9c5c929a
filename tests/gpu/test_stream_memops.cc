// How the stream-counter operations are chosen (src/exec/cuda/stream_memops.h):
// LANES_STREAM_MEMOPS is read once per process, so each case runs in a forked
// child. Neither case needs a GPU: `kernel` makes no CUDA call to choose, and
// an unknown value is refused before any.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>

#include "exec/cuda/stream_memops.h"

namespace lanes {
namespace {

// Runs `body` in a child with LANES_STREAM_MEMOPS=`mode`; its exit code.
int inChild(const char* mode, const std::function<int()>& body) {
  pid_t pid = fork();
  if (pid == 0) {
    setenv("LANES_STREAM_MEMOPS", mode, 1);
    _exit(body());
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Decisive where a driver provides the memory operations (the GPU machine),
// since `auto` would choose them there; without a driver both modes end up
// on the kernels and only get()'s success is checked.
TEST(StreamMemops, KernelModeUsesTheFlagKernels) {
  const int code = inChild("kernel", [] {
    const StreamMemops* memops = nullptr;
    Status s = StreamMemops::get(&memops);
    if (!s) return 1;
    return memops->usesDriver() ? 2 : 0;
  });
  EXPECT_EQ(code, 0) << "1: get() failed, 2: the driver's operations were chosen";
}

TEST(StreamMemops, UnknownModeIsRefusedWithTheChoices) {
  const int code = inChild("fast", [] {
    const StreamMemops* memops = nullptr;
    Status s = StreamMemops::get(&memops);
    if (s) return 1;
    const std::string& m = s.message();
    const bool names = m.find("LANES_STREAM_MEMOPS=fast") != std::string::npos &&
                       m.find("auto, driver, kernel") != std::string::npos;
    return names ? 0 : 2;
  });
  EXPECT_EQ(code, 0) << "1: accepted, 2: the message does not name the value and the choices";
}

}  // namespace
}  // namespace lanes
