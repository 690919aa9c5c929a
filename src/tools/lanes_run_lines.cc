#include "tools/lanes_run_lines.h"

#include <unistd.h>

#include <cerrno>

namespace lanes::run {

void writeAll(int fd, const char* data, size_t bytes) {
  while (bytes > 0) {
    ssize_t n = ::write(fd, data, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // EPIPE and friends: nobody is reading; drop the output
    }
    data += n;
    bytes -= static_cast<size_t>(n);
  }
}

LineForwarder::LineForwarder(int rank, int outFd, bool prefix)
    : prefix_(prefix ? "[" + std::to_string(rank) + "] " : ""), outFd_(outFd) {}

void LineForwarder::emit(const char* data, size_t bytes) {
  // One write per line keeps lines whole even if another process shares the fd.
  std::string line;
  line.reserve(prefix_.size() + bytes + 1);
  line.append(prefix_).append(data, bytes);
  if (line.back() != '\n') line.push_back('\n');
  writeAll(outFd_, line.data(), line.size());
}

void LineForwarder::feed(const char* data, size_t bytes) {
  pending_.append(data, bytes);
  size_t start = 0;
  while (true) {
    size_t nl = pending_.find('\n', start);
    if (nl == std::string::npos) break;
    emit(pending_.data() + start, nl - start + 1);
    start = nl + 1;
  }
  while (pending_.size() - start >= kMaxLine) {
    emit(pending_.data() + start, kMaxLine);
    start += kMaxLine;
  }
  pending_.erase(0, start);
}

void LineForwarder::finish() {
  if (!pending_.empty()) emit(pending_.data(), pending_.size());
  pending_.clear();
}

}  // namespace lanes::run
