// Sets (or, given std::nullopt, unsets) an environment variable of this
// process for a scope and restores the previous value (or its absence)
// afterwards. Forked children inherit what is set. Tests only: setenv is not
// thread-safe, so set variables before starting rank threads.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace lanes::test {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value->c_str(), 1);
    else
      ::unsetenv(name);
  }
  ScopedEnv(const char* name, const char* value)
      : ScopedEnv(name, std::optional<std::string>(value)) {}
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace lanes::test
