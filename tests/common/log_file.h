// A test case's log in a temporary file: `variable` (LANES_DEBUG_FILE, or its
// NCCL twin) points at it for the object's life; the log is re-read when it
// goes away, which closes the file. Tests only.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "base/log.h"
#include "tests/common/scoped_env.h"

namespace lanes::test {

// How often `what` occurs in `text`.
inline size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class LogFile {
 public:
  explicit LogFile(const char* variable = "LANES_DEBUG_FILE")
      : path_(::testing::TempDir() + "lanes_log_" + std::to_string(getpid()) + ".log") {
    std::remove(path_.c_str());
    file_ = std::make_unique<ScopedEnv>(variable, path_.c_str());
  }
  ~LogFile() {
    file_.reset();
    logReloadConfig();  // closes the file
    std::remove(path_.c_str());
  }
  LogFile(const LogFile&) = delete;
  LogFile& operator=(const LogFile&) = delete;

  std::string text() const {
    std::ifstream in(path_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  size_t count(const std::string& what) const { return occurrences(text(), what); }

 private:
  std::string path_;
  std::unique_ptr<ScopedEnv> file_;
};

}  // namespace lanes::test
