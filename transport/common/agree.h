// agreeOnStatus: turns one rank's setup result into the communicator's. Every
// rank gathers every rank's result, so a rank that failed (no /dev/shm space,
// a refused socket) does not leave the others waiting at the next barrier
// until their deadline.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "core/status.h"

namespace lanes {

// Returns `local` if it failed; otherwise an error naming the first other
// rank that failed `what`; otherwise OK. Collective.
inline Status agreeOnStatus(Bootstrap& bootstrap, const Status& local, const char* what,
                            Deadline deadline) {
  std::vector<int32_t> codes(static_cast<size_t>(bootstrap.nranks()), 0);
  codes[static_cast<size_t>(bootstrap.rank())] = static_cast<int32_t>(local.code());
  Status gathered = bootstrap.allGather(codes.data(), sizeof(int32_t), deadline);
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
