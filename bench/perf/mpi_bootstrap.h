/* Ranks an MPI launcher started (mpirun, mpiexec, srun --mpi=pmix) meet as
 * nccl-tests built with MPI meets them: rank 0 makes the unique id and
 * MPI_Bcast's it, then every rank calls lanesCommInitRank. No root address
 * is needed. Built as the library lanes_mpi_bootstrap where CMake finds MPI;
 * this header is C and needs no mpi.h, so any program can link it. */
#pragma once

#include "lanes/lanes.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when an MPI launcher started this process (OMPI_COMM_WORLD_SIZE,
 * PMIX_RANK, PMI_RANK with PMI_SIZE, MV2_COMM_WORLD_SIZE) and no root address
 * is set (LANES_ROOT_ADDR, MASTER_ADDR): then lanesCommInitFromEnv would have
 * nowhere to meet. A root address wins, so lanes-run, torchrun and an mpirun
 * given LANES_ROOT_ADDR keep the environment launch. Makes no MPI call. */
int lanesMpiLaunched(void);

/* MPI_Init unless the program already did, then this process's rank, the
 * number of ranks and the rank among those on this node (for its GPU). */
lanesResult_t lanesMpiStart(int* rank, int* nranks, int* localRank);

/* Rank 0: lanesGetUniqueId and MPI_Bcast over MPI_COMM_WORLD; every rank:
 * lanesCommInitRank with it. When rank 0 cannot make an id, every rank
 * returns its result and lanesMpiLastError() says why. */
lanesResult_t lanesMpiCommInit(lanesComm_t* comm);

/* The last failure of the two calls above, as a sentence; "" when none. */
const char* lanesMpiLastError(void);

/* MPI_Finalize, when lanesMpiStart initialized MPI. */
void lanesMpiFinish(void);

#ifdef __cplusplus
}
#endif
