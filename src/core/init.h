// Communicator creation, shared by lanesCommInitRank*, InitAll, InitFromEnv and Split.
#pragma once

#include "core/comm.h"
#include "core/status.h"

namespace lanes {

Status parseConfig(const lanesConfig_t* config, CommOptions* out);
Status initComm(const lanesUniqueId& id, int nranks, int rank, const CommOptions& options,
                lanesComm_t* out);

}  // namespace lanes
