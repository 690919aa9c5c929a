/* Scenarios of nccl_abi_test and the helpers they share. */
#ifndef LANES_TESTS_COMPAT_NCCL_ABI_TEST_H_
#define LANES_TESTS_COMPAT_NCCL_ABI_TEST_H_

#include <nccl.h>

#include "abi_data.h"
#include "abi_harness.h"

/* Not in nccl.h (they come with nccl_device.h, which needs a CUDA compiler);
 * the arguments are opaque here. */
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void* reqs, void* outDevComm);
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const void* devComm);

/* Whether this machine shows an NVIDIA GPU (/dev/nvidiactl). */
int abi_have_gpu(void);

/* ncclCommInitRank for r->rank of r->nranks with ids[id_index]; ends the rank
 * on failure. Checks ncclCommCount and ncclCommUserRank. */
ncclComm_t abi_init_comm(const abi_rank_t* r, int id_index);

/* Checks count, user rank and (without a GPU) ncclCommCuDevice == -1. */
void abi_check_comm_shape(ncclComm_t comm, int nranks, int rank, const char* what);

/* A float32 sum all-reduce on `comm`, whose ranks are the parent ranks
 * members[0..n) in that order; `me` is the caller's parent rank. 1 when the
 * call succeeded and the result is right. */
int abi_allreduce_ok(ncclComm_t comm, const int* members, int nmembers, int me, unsigned salt,
                     const char* what);
/* An int32 all-gather of each rank's parent rank: checks that the ranks of
 * `comm` are members[0..n) in that order. */
int abi_order_ok(ncclComm_t comm, const int* members, int nmembers, int me, const char* what);

/* Polls ncclCommGetAsyncError until it is not ncclInProgress (at most
 * `seconds`); returns the last state (ncclInProgress when it never settled). */
ncclResult_t abi_wait_settled(ncclComm_t comm, double seconds);

/* Scenario bodies. */
void scenario_allreduce(const abi_rank_t* r);
void scenario_collectives(const abi_rank_t* r);
void scenario_groups(const abi_rank_t* r);
void scenario_init_all(const abi_rank_t* r);
void scenario_init_in_group(const abi_rank_t* r);
void scenario_nonblocking(const abi_rank_t* r);
void scenario_scalable(const abi_rank_t* r);
void scenario_split(const abi_rank_t* r);
void scenario_shrink(const abi_rank_t* r);
void scenario_shrink_after_kill(const abi_rank_t* r);
void scenario_abort(const abi_rank_t* r);
void scenario_revoke(const abi_rank_t* r);
void scenario_simulate(const abi_rank_t* r);
void scenario_register(const abi_rank_t* r);
void scenario_queries(const abi_rank_t* r);
void scenario_errors(const abi_rank_t* r);
void scenario_comm_id(const abi_rank_t* r);
/* Run in the parent before the ranks start: the port they pin. */
void prepare_comm_id(void);

#endif /* LANES_TESTS_COMPAT_NCCL_ABI_TEST_H_ */
