// NCCL as a CollBackend, for running the same sweep side by side. NCCL is
// opened at run time (dlopen), so the tools build and run without it; a
// machine without NCCL only loses --backend nccl / --compare nccl.
#pragma once

#include <memory>
#include <string>

#include "perf/backend.h"

namespace lanes::perf {

// LANES_PERF_NCCL_LIB (a path or soname), else "libnccl.so.2".
std::string ncclLibraryName();

class NcclLibrary;  // the dlopen handle and the resolved entry points

// Opens NCCL; the error names the library and carries dlerror().
Status openNccl(std::shared_ptr<const NcclLibrary>* out);
// "2.28.9", from ncclGetVersion.
std::string ncclVersionString(const NcclLibrary& lib);
// Whether the library is Lanes' own libnccl.so.2 (its ncclGetErrorString names
// Lanes), which unlike NCCL lets several ranks share a GPU.
bool ncclIsLanesLayer(const NcclLibrary& lib);

// ncclUniqueId's bytes (NCCL_UNIQUE_ID_BYTES), passed around by the driver
// over the Lanes communicator the way every other rank-0 fact is.
struct NcclId {
  char bytes[128] = {};
};
Status ncclNewId(const NcclLibrary& lib, NcclId* out);

// ncclCommInitRank on the calling thread's current GPU (collective: every
// rank calls it with the same id).
Status makeNcclBackend(std::shared_ptr<const NcclLibrary> lib, const NcclId& id, int rank,
                       int nranks, std::unique_ptr<CollBackend>* out);

}  // namespace lanes::perf
