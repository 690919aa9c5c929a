// Status: the internal error currency. Carries a lanesResult_t and the
// sentence lanesGetLastError will show; never thrown across the C boundary.
#pragma once

#include <string>
#include <utility>

#include "lanes/lanes.h"

namespace lanes {

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(lanesResult_t code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  bool isOk() const { return code_ == lanesSuccess; }
  explicit operator bool() const { return isOk(); }
  lanesResult_t code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  lanesResult_t code_ = lanesSuccess;
  std::string message_;
};

inline Status invalidArgument(std::string m) { return {lanesInvalidArgument, std::move(m)}; }
inline Status invalidUsage(std::string m) { return {lanesInvalidUsage, std::move(m)}; }
inline Status systemError(std::string m) { return {lanesSystemError, std::move(m)}; }
inline Status internalError(std::string m) { return {lanesInternalError, std::move(m)}; }
inline Status remoteError(std::string m) { return {lanesRemoteError, std::move(m)}; }
inline Status timeoutError(std::string m) { return {lanesTimeout, std::move(m)}; }
inline Status cudaError(std::string m) { return {lanesUnhandledCudaError, std::move(m)}; }

// errno as text, for system-call failures.
std::string errnoText(int err);

}  // namespace lanes

#define LANES_RETURN_IF_ERROR(expr)                  \
  do {                                               \
    ::lanes::Status lanes_status_ = (expr);          \
    if (!lanes_status_.isOk()) return lanes_status_; \
  } while (0)
