// The environment of the host-summation GPU tests (test_host_sum.cc,
// test_host_sum_wire.cc).
#pragma once

#include <cstdlib>

#include "tests/common/scoped_env.h"

namespace lanes::test {

// Before any CUDA call of this process: hardware queues for 8 thread ranks'
// streams, and 1 MiB slots so the large counts span several chunks and
// reuse slots (the lead's environment wins where it sets them).
inline const bool kHostSumProcessEnv = [] {
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  setenv("LANES_STAGE_CHUNK_BYTES", "1M", 0);
  return true;
}();

// Forced onto host summation, the slots in host memory, small calls too.
struct HostSumEnv {
  ScopedEnv proto{"LANES_PROTO", "host_sum"};
  ScopedEnv p2p{"LANES_P2P_DISABLE", "1"};
  ScopedEnv proxy{"LANES_SHARED_GPU_PROXY_BYTES", "0"};
};

}  // namespace lanes::test
