// SHA-256, for deriving a launcher job's bootstrap secret and commId from
// values every rank sees (no secrecy claim: see docs/security.md).
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace lanes {

std::array<uint8_t, 32> sha256(const std::string& data);

}  // namespace lanes
