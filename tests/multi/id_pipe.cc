#include "tests/multi/id_pipe.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace lanes::test {
namespace {

void closeFd(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

}  // namespace

IdPipe::~IdPipe() {
  closeFd(&read_);
  closeFd(&write_);
}

bool IdPipe::open(std::string* error) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    *error = std::string("pipe2: ") + std::strerror(errno);
    return false;
  }
  read_ = fds[0];
  write_ = fds[1];
  return true;
}

bool IdPipe::receive(lanesUniqueId* id) {
  closeFd(&write_);
  size_t got = 0;
  while (got < sizeof *id) {
    ssize_t n = ::read(read_, reinterpret_cast<char*>(id) + got, sizeof *id - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  closeFd(&read_);
  return got == sizeof *id;
}

bool IdPipe::send(const lanesUniqueId* id, size_t ranks) {
  closeFd(&read_);
  bool ok = true;
  // One id per rank; each write is atomic (smaller than PIPE_BUF).
  for (size_t r = 0; id != nullptr && ok && r < ranks; ++r)
    ok = ::write(write_, id, sizeof *id) == static_cast<ssize_t>(sizeof *id);
  closeFd(&write_);
  return ok;
}

}  // namespace lanes::test
