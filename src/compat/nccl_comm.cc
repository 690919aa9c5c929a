// Communicator lifecycle and queries of the NCCL API, on Lanes.
#include <cstdlib>
#include <cstring>

#include "base/log.h"
#include "base/nccl_env.h"
#include "bootstrap/bootstrap.h"
#include "compat/nccl_convert.h"
#include "core/errors.h"

using namespace lanes;
using namespace lanes::compat;

namespace {

// The library was loaded as libnccl.so.2: NCCL_* variables now count.
__attribute__((constructor)) void loadAsNccl() { enableNcclEnvironment(); }

ncclResult_t refuse(lanesComm_t comm, const Status& st) { return toNccl(report(comm, st)); }

// Rank 0 of a communicator whose id ncclGetUniqueId derived from NCCL_COMM_ID
// serves its rendezvous.
Status startPinnedRoot(const lanesUniqueId& id, int rank) {
  const char* pinned = std::getenv("NCCL_COMM_ID");
  if (pinned == nullptr || rank != 0) return Status::ok();
  lanesUniqueId derived;
  if (!pinnedUniqueId(pinned, false, &derived) || std::memcmp(&derived, &id, sizeof(id)) != 0)
    return Status::ok();  // an id made otherwise: its root runs where it was made
  lanesUniqueId started;
  Status st = pinnedUniqueId(pinned, true, &started);
  if (!st) return Status(st.code(), std::string("NCCL_COMM_ID=") + pinned + ": " + st.message());
  return Status::ok();
}

}  // namespace

#pragma GCC visibility push(default)
extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr)
    return refuse(nullptr, invalidArgument("ncclGetVersion: version is NULL"));
  *version = NCCL_VERSION_CODE;  // the header this layer was built against
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (uniqueId == nullptr)
    return refuse(nullptr, invalidArgument("ncclGetUniqueId: uniqueId is NULL"));
  lanesUniqueId id;
  // NCCL_COMM_ID pins the root's address, as in NCCL: every process derives
  // the same id, and rank 0 starts the root when it joins.
  const char* pinned = std::getenv("NCCL_COMM_ID");
  Status st = pinned != nullptr ? pinnedUniqueId(pinned, false, &id)
                                : createUniqueIdAndRoot("", nullptr, &id);
  if (!st)
    return refuse(nullptr, pinned == nullptr ? st
                                             : Status(st.code(), std::string("NCCL_COMM_ID=") +
                                                                     pinned + ": " + st.message()));
  std::memcpy(uniqueId, &id, sizeof(id));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  announce();
  lanesConfig_t cfg;
  if (Status st = toLanesConfig(config, &cfg); !st) return refuse(nullptr, st);
  lanesUniqueId id;
  std::memcpy(&id, &commId, sizeof(id));
  if (Status st = startPinnedRoot(id, rank); !st) return refuse(nullptr, st);
  return toNccl(lanesCommInitRankConfig(reinterpret_cast<lanesComm_t*>(comm), nranks, id, rank,
                                        config != nullptr ? &cfg : nullptr));
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return ncclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config) {
  announce();
  lanesConfig_t cfg;
  if (Status st = toLanesConfig(config, &cfg); !st) return refuse(nullptr, st);
  return toNccl(lanesCommInitRankScalable(reinterpret_cast<lanesComm_t*>(newcomm), nranks, myrank,
                                          nId, reinterpret_cast<lanesUniqueId*>(commIds),
                                          config != nullptr ? &cfg : nullptr));
}

ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  announce();
  return toNccl(lanesCommInitAll(reinterpret_cast<lanesComm_t*>(comm), ndev, devlist));
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  lanesConfig_t cfg;
  if (Status st = toLanesConfig(config, &cfg); !st) return refuse(toLanes(comm), st);
  return toNccl(lanesCommSplit(toLanes(comm), color, key, reinterpret_cast<lanesComm_t*>(newcomm),
                               config != nullptr ? &cfg : nullptr));
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  lanesConfig_t cfg;
  if (Status st = toLanesConfig(config, &cfg); !st) return refuse(toLanes(comm), st);
  return toNccl(lanesCommShrink(toLanes(comm), excludeRanksList, excludeRanksCount,
                                reinterpret_cast<lanesComm_t*>(newcomm),
                                config != nullptr ? &cfg : nullptr, shrinkFlags));
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) { return toNccl(lanesCommFinalize(toLanes(comm))); }
ncclResult_t ncclCommDestroy(ncclComm_t comm) { return toNccl(lanesCommDestroy(toLanes(comm))); }
ncclResult_t ncclCommAbort(ncclComm_t comm) { return toNccl(lanesCommAbort(toLanes(comm))); }
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  return toNccl(lanesCommRevoke(toLanes(comm), revokeFlags));
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  lanesResult_t err = lanesSuccess;
  lanesResult_t r = lanesCommGetAsyncError(toLanes(comm), asyncError != nullptr ? &err : nullptr);
  if (r == lanesSuccess) *asyncError = toNccl(err);
  return toNccl(r);
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  return toNccl(lanesCommCount(toLanes(comm), count));
}
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  return toNccl(lanesCommCuDevice(toLanes(comm), device));
}
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  return toNccl(lanesCommUserRank(toLanes(comm), rank));
}

const char* ncclGetErrorString(ncclResult_t result) {
  // As lanesGetErrorString: the NCCL_DEBUG hint only where that level is off.
  const bool warnOn = logLevelOn(LogLevel::Warn);
  const bool infoOn = logLevelOn(LogLevel::Info);
  switch (rawValue(result)) {  // a C caller may pass any int
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return infoOn ? "unhandled cuda error"
                    : "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return infoOn ? "unhandled system error"
                    : "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the Lanes developers";
    case ncclInvalidArgument:
      return warnOn ? "invalid argument"
                    : "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return warnOn ? "invalid usage" : "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t comm) { return lanesGetLastError(toLanes(comm)); }

void ncclResetDebugInit() { logReloadConfig(); }

}  // extern "C"

LANES_NCCL_ALIAS(ncclGetVersion);
LANES_NCCL_ALIAS(ncclGetUniqueId);
LANES_NCCL_ALIAS(ncclCommInitRankConfig);
LANES_NCCL_ALIAS(ncclCommInitRank);
LANES_NCCL_ALIAS(ncclCommInitRankScalable);
LANES_NCCL_ALIAS(ncclCommInitAll);
LANES_NCCL_ALIAS(ncclCommSplit);
LANES_NCCL_ALIAS(ncclCommShrink);
LANES_NCCL_ALIAS(ncclCommFinalize);
LANES_NCCL_ALIAS(ncclCommDestroy);
LANES_NCCL_ALIAS(ncclCommAbort);
LANES_NCCL_ALIAS(ncclCommRevoke);
LANES_NCCL_ALIAS(ncclCommGetAsyncError);
LANES_NCCL_ALIAS(ncclCommCount);
LANES_NCCL_ALIAS(ncclCommCuDevice);
LANES_NCCL_ALIAS(ncclCommUserRank);
LANES_NCCL_ALIAS(ncclGetErrorString);
LANES_NCCL_ALIAS(ncclGetLastError);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // NCCL still exports it
LANES_NCCL_ALIAS(ncclResetDebugInit);
#pragma GCC diagnostic pop
#pragma GCC visibility pop
