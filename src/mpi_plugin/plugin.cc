// liblanes-mpi.so: the MPI calls behind plugin_abi.h, and nothing else. MPI
// carries the unique id only; the program's traffic runs on Lanes.
#include "mpi_plugin/plugin_abi.h"

// The C API only: mpi.h read by a C++ compiler otherwise pulls in the
// deprecated C++ bindings, which MPI::MPI_C does not link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <climits>
#include <cstdio>
#include <cstdlib>

namespace {

int fail(char* err, size_t len, const char* what, int code) {
  char text[MPI_MAX_ERROR_STRING] = "";
  int n = 0;
  MPI_Error_string(code, text, &n);
  std::snprintf(err, len, "%s failed: %s", what, text);
  return -1;
}

void finalizeAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

int start(int* rank, int* nranks, char* err, size_t errLen) {
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    // Lanes calls MPI from whichever thread joins, one call at a time.
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) return fail(err, errLen, "MPI_Init_thread", rc);
    // Ours to finalize: an MPI process that exits without it fails the job.
    std::atexit(finalizeAtExit);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, nranks);
  return 0;
}

int broadcast(void* data, size_t bytes, char* err, size_t errLen) {
  if (bytes > static_cast<size_t>(INT_MAX)) {
    std::snprintf(err, errLen, "MPI_Bcast of %zu bytes is over MPI's int count", bytes);
    return -1;
  }
  int rc = MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, 0, MPI_COMM_WORLD);
  return rc == MPI_SUCCESS ? 0 : fail(err, errLen, "MPI_Bcast of the unique id", rc);
}

constexpr lanesMpiPlugin kPlugin = {lanesMpiPluginAbiVersion, start, broadcast};

}  // namespace

extern "C" __attribute__((visibility("default"))) const lanesMpiPlugin* lanesMpiPluginV1(void) {
  return &kPlugin;
}
