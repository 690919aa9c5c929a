// Forwards one rank's stdout or stderr line by line, each line prefixed
// "[rank] " (or not: the supervisor decides per stream), so the output of
// many ranks interleaves only at line boundaries.
#pragma once

#include <string>

namespace lanes::run {

class LineForwarder {
 public:
  // `outFd`: where lines go (the launcher's stdout or stderr).
  LineForwarder(int rank, int outFd, bool prefix);

  // Appends bytes read from the rank and writes out every complete line.
  void feed(const char* data, size_t bytes);
  // Writes a trailing partial line (with a newline added); at the rank's EOF.
  void finish();

  // A line longer than this is written out in pieces (each prefixed) so a
  // rank that never prints a newline cannot grow the buffer without bound.
  static constexpr size_t kMaxLine = 64 * 1024;

 private:
  void emit(const char* data, size_t bytes);  // one line, newline included

  std::string prefix_;
  int outFd_;
  std::string pending_;
};

// write() until done; EINTR retried, other errors (a closed reader) dropped.
void writeAll(int fd, const char* data, size_t bytes);

}  // namespace lanes::run
