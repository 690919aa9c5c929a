// The MPI side of mpi_bootstrap.h. MPI carries the unique id and nothing
// else: the program's own traffic runs on the Lanes communicator.
#include "perf/mpi_bootstrap.h"

// The C API only: mpi.h read by a C++ compiler otherwise pulls in the
// deprecated C++ bindings, which live in a library MPI::MPI_C does not link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

thread_local std::string lastError;
bool initializedHere = false;  // MPI_Finalize is ours to call

bool isSet(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

lanesResult_t fail(lanesResult_t r, std::string why) {
  lastError = std::move(why);
  return r;
}

std::string mpiText(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, buf, &len);
  return std::string(buf, static_cast<size_t>(len));
}

// Rank 0's broadcast: the id, or why it has none (so every rank can say).
struct IdMessage {
  int32_t result;
  char why[480];
  lanesUniqueId id;
};

}  // namespace

extern "C" {

int lanesMpiLaunched(void) {
  // An explicit Lanes launch or a root address wins (docs/benchmarks.md).
  if (isSet("LANES_RANK") || isSet("LANES_ROOT_ADDR") || isSet("MASTER_ADDR")) return 0;
  return isSet("OMPI_COMM_WORLD_SIZE") || isSet("PMIX_RANK") ||
         (isSet("PMI_RANK") && isSet("PMI_SIZE")) || isSet("MV2_COMM_WORLD_SIZE");
}

lanesResult_t lanesMpiStart(int* rank, int* nranks, int* localRank) {
  lastError.clear();
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    // Only the main thread calls MPI; the program's other threads never do.
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return fail(lanesSystemError, "MPI_Init_thread failed: " + mpiText(rc));
    initializedHere = true;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, nranks);
  // The ranks that share this node's memory are the ones on this host.
  MPI_Comm node = MPI_COMM_NULL;
  int rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, *rank, MPI_INFO_NULL, &node);
  if (rc != MPI_SUCCESS)
    return fail(lanesSystemError, "MPI_Comm_split_type (ranks per node) failed: " + mpiText(rc));
  MPI_Comm_rank(node, localRank);
  MPI_Comm_free(&node);
  return lanesSuccess;
}

lanesResult_t lanesMpiCommInit(lanesComm_t* comm) {
  lastError.clear();
  if (comm == nullptr) return fail(lanesInvalidArgument, "comm (the output pointer) is NULL");
  *comm = nullptr;
  int rank = 0, nranks = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  IdMessage m{};
  if (rank == 0) {
    m.result = lanesGetUniqueId(&m.id);
    if (m.result != lanesSuccess)
      std::snprintf(m.why, sizeof(m.why), "%s", lanesGetLastError(nullptr));
  }
  int rc = MPI_Bcast(&m, sizeof(m), MPI_BYTE, 0, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS)
    return fail(lanesSystemError, "MPI_Bcast of the unique id failed: " + mpiText(rc));
  const auto made = static_cast<lanesResult_t>(m.result);
  if (made != lanesSuccess)
    return fail(made, std::string("rank 0 could not make the unique id: ") + m.why);
  lanesResult_t r = lanesCommInitRank(comm, nranks, m.id, rank);
  if (r != lanesSuccess) return fail(r, lanesGetLastError(nullptr));
  return lanesSuccess;
}

const char* lanesMpiLastError(void) { return lastError.c_str(); }

void lanesMpiFinish(void) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (initializedHere && !finalized) MPI_Finalize();
}

}  // extern "C"
