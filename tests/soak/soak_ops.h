// Runs one planned operation on one communicator and checks its result
// against references computed by tests/multi/data (never by the library).
#pragma once

#include <string>

#include "lanes/lanes.h"
#include "tests/soak/soak_plan.h"

namespace lanes::soak {

// "" when the call succeeded and every checked byte is right; otherwise what
// failed, on which rank of the communicator.
std::string runAndCheck(const OpSpec& op, lanesComm_t comm);

}  // namespace lanes::soak
