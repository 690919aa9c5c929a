// Host identity: ranks with equal host hashes share memory and use shm.
#pragma once

#include <cstdint>
#include <string>

namespace lanes {

// Hash of LANES_HOSTID when set (tests give each network namespace its own),
// else of hostname + /proc/sys/kernel/random/boot_id.
uint64_t hostHash();
std::string hostName();

}  // namespace lanes
