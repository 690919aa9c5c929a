/* The C interface between liblanes and liblanes-mpi.so, the MPI plugin that
 * carries the unique id when an MPI launcher started the job and no root
 * address was given (src/bootstrap/mpi_join.cc). A plugin keeps liblanes
 * free of an MPI dependency: only a build that found MPI has one, and a
 * program that never runs under MPI never loads it. */
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { lanesMpiPluginAbiVersion = 1 };

typedef struct {
  int version; /* lanesMpiPluginAbiVersion */
  /* MPI_Init_thread unless the program already did (then MPI_Finalize runs
   * at exit); this process's rank and the number of ranks in
   * MPI_COMM_WORLD. 0 on success, else -1 with why in err. */
  int (*start)(int* rank, int* nranks, char* err, size_t errLen);
  /* MPI_Bcast of `bytes` at `data` from rank 0 over MPI_COMM_WORLD. */
  int (*broadcast)(void* data, size_t bytes, char* err, size_t errLen);
} lanesMpiPlugin;

/* The one symbol the plugin exports. */
const lanesMpiPlugin* lanesMpiPluginV1(void);

#ifdef __cplusplus
}
#endif
