// Communicator creation, shared by lanesCommInitRank*, InitAll, InitFromEnv,
// Split and Shrink.
#pragma once

#include <vector>

#include "base/status.h"
#include "bootstrap/bootstrap.h"
#include "core/comm.h"

namespace lanes {

Status parseConfig(const lanesConfig_t* config, CommOptions* out);
// Creates the communicator. With options.blocking false, or inside a group,
// the work runs on a thread of its own and *out is usable at once (queries;
// other calls wait for it): the result is lanesInProgress when non-blocking.
Status initComm(const lanesUniqueId& id, int nranks, int rank, const CommOptions& options,
                lanesComm_t* out);
// Same, joining the bootstrap by `join` (a child of an existing
// communicator's: Bootstrap::childJoin).
Status initCommWith(Bootstrap::Join join, int nranks, int rank, const CommOptions& options,
                    lanesComm_t* out);
Status startInit(Bootstrap::Join join, int nranks, int rank, const CommOptions& options,
                 lanesComm_t* out);
// Thread ranks of this process, one per entry of `devices` (its CUDA device;
// -1: a host-only rank), as lanesCommInitAll; on failure none is left.
Status initThreadRanks(const std::vector<int>& devices, const CommOptions& options,
                       lanesComm_t* comms);
// Waits until a communicator created in the background is ready or failed.
Status awaitInit(lanesComm* comm);
// At the end of a group: waits for the communicators this thread created in it.
Status awaitGroupInits();
// Frees a communicator already retired from the registry (core/lifecycle.cc):
// stops its device paths, closes its connections (abruptly unless graceful),
// shuts its bootstrap down.
void releaseComm(lanesComm* comm, bool graceful);
// As releaseComm, unless its init still runs: then the init thread frees it
// when its own waits end, and this returns at once.
void releaseOrAbandon(lanesComm* comm, bool graceful);
// Tells the peers once that this rank aborts (with the root cause if known).
void spreadAbort(lanesComm* comm);

}  // namespace lanes
