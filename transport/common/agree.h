// agreeOnStatus: turns one rank's setup result into the communicator's. Every
// rank gathers every rank's result, so a rank that failed (no /dev/shm space,
// a refused socket) does not leave the others waiting at the next barrier
// until their deadline.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "bootstrap/bootstrap.h"

namespace lanes {

// Returns `local` if it failed; otherwise the gather's error; otherwise an
// error naming the first other rank that failed `what`; otherwise OK.
// Collective. *gatherFailed (when given): the gather itself failed, so the
// ranks may not agree and the caller must not go on with a fallback.
inline Status agreeOnStatus(Bootstrap& bootstrap, const Status& local, const char* what,
                            Deadline deadline, bool* gatherFailed = nullptr) {
  std::vector<int32_t> codes(static_cast<size_t>(bootstrap.nranks()), 0);
  codes[static_cast<size_t>(bootstrap.rank())] = static_cast<int32_t>(local.code());
  Status gathered = bootstrap.allGather(codes.data(), sizeof(int32_t), deadline);
  if (gatherFailed != nullptr) *gatherFailed = !gathered.isOk();
  if (!local.isOk()) return local;
  LANES_RETURN_IF_ERROR(gathered);
  for (size_t r = 0; r < codes.size(); ++r) {
    if (codes[r] != 0) {
      return remoteError("rank " + std::to_string(r) + " failed to " + what +
                         "; its own error says why");
    }
  }
  return Status::ok();
}

}  // namespace lanes
