/* NCCL ABI test: C programs written against the CUDA toolkit's nccl.h only,
 * linked with Lanes' libnccl.so.2, on host (malloc'd) buffers with stream
 * NULL. Each scenario forks its ranks (tests/compat/abi_harness.h) and checks
 * every result against a reference computed here.
 *
 * Usage: nccl_abi_test <scenario> [nranks]; nccl_abi_test --list. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "nccl_abi_test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- shared helpers ---- */

/* A GPU this process may use: the driver's device node, unless
 * CUDA_VISIBLE_DEVICES hides every GPU (CTest sets it empty for these tests). */
int abi_have_gpu(void) {
  const char* visible = getenv("CUDA_VISIBLE_DEVICES");
  if (visible != NULL && (visible[0] == '\0' || strncmp(visible, "-1", 2) == 0 ||
                          strcmp(visible, "none") == 0 || strcmp(visible, "NoDevFiles") == 0))
    return 0;
  return access("/dev/nvidiactl", F_OK) == 0;
}

void abi_check_comm_shape(ncclComm_t comm, int nranks, int rank, const char* what) {
  int count = -7, me = -7, dev = -7;
  if (NCCL_OK(ncclCommCount(comm, &count), comm))
    CHECK(count == nranks, "%s: ncclCommCount gave %d, expected %d", what, count, nranks);
  if (NCCL_OK(ncclCommUserRank(comm, &me), comm))
    CHECK(me == rank, "%s: ncclCommUserRank gave %d, expected %d", what, me, rank);
  if (NCCL_OK(ncclCommCuDevice(comm, &dev), comm)) {
    if (abi_have_gpu())
      CHECK(dev >= 0, "%s: ncclCommCuDevice gave %d on a machine with a GPU", what, dev);
    else
      CHECK(dev == -1, "%s: ncclCommCuDevice gave %d, expected -1 (no GPU here)", what, dev);
  }
}

ncclComm_t abi_init_comm(const abi_rank_t* r, int id_index) {
  ncclComm_t comm = NULL;
  NCCL_REQUIRE(ncclCommInitRank(&comm, r->nranks, r->ids[id_index], r->rank), NULL);
  REQUIRE(comm != NULL, "ncclCommInitRank succeeded but left *comm NULL");
  abi_check_comm_shape(comm, r->nranks, r->rank, "ncclCommInitRank");
  return comm;
}

int abi_allreduce_ok(ncclComm_t comm, const int* members, int nmembers, int me, unsigned salt,
                     const char* what) {
  const size_t count = 1031;
  const ncclDataType_t t = ncclFloat32;
  size_t bytes = count * abi_type_size(t);
  float* send = (float*)abi_alloc(bytes);
  float* recv = (float*)abi_alloc(bytes);
  abi_fill_red(t, ABI_SUM, me, nmembers, send, count, 0, salt);
  int ok = 0;
  char expr[256];
  snprintf(expr, sizeof expr, "%s: ncclAllReduce(float32 sum, count %zu)", what, count);
  if (abi_expect(ncclAllReduce(send, recv, count, t, ncclSum, comm, NULL), ncclSuccess, expr, comm,
                 __FILE__, __LINE__)) {
    const char* err = abi_check_red_over(t, ABI_SUM, members, nmembers, recv, count, 0, salt);
    ok = CHECK(err == NULL, "%s: all-reduce result: %s", what, err);
  }
  abi_free(send, bytes);
  abi_free(recv, bytes);
  return ok;
}

int abi_order_ok(ncclComm_t comm, const int* members, int nmembers, int me, const char* what) {
  int32_t mine = me;
  int32_t all[ABI_MAX_RANKS * 2];
  for (int i = 0; i < nmembers; ++i) all[i] = -1;
  char expr[256];
  snprintf(expr, sizeof expr, "%s: ncclAllGather(int32 parent rank)", what);
  if (!abi_expect(ncclAllGather(&mine, all, 1, ncclInt32, comm, NULL), ncclSuccess, expr, comm,
                  __FILE__, __LINE__))
    return 0;
  int ok = 1;
  for (int i = 0; i < nmembers; ++i)
    ok &= CHECK(all[i] == members[i],
                "%s: rank %d of the new communicator is parent rank %d, expected %d", what, i,
                (int)all[i], members[i]);
  return ok;
}

ncclResult_t abi_wait_settled(ncclComm_t comm, double seconds) {
  double deadline = abi_now() + seconds;
  ncclResult_t state = ncclInProgress;
  for (;;) {
    ncclResult_t res = ncclCommGetAsyncError(comm, &state);
    if (res != ncclSuccess) {
      abi_fail(__FILE__, __LINE__, "ncclCommGetAsyncError returned %d (%s, %s)", (int)res,
               ncclGetErrorString(res), ncclGetLastError(comm));
      return res;
    }
    if (state != ncclInProgress || abi_now() > deadline) return state;
    abi_sleep(0.005);
  }
}

/* ---- all-reduce: every op and datatype ---- */

static const ncclDataType_t kAllTypes[] = {
    ncclInt8,    ncclUint8,    ncclInt32,   ncclUint32,  ncclInt64,      ncclUint64,
    ncclFloat16, ncclBfloat16, ncclFloat32, ncclFloat64, ncclFloat8e4m3, ncclFloat8e5m2};
#define NTYPES (sizeof kAllTypes / sizeof kAllTypes[0])

/* The inputs of `rank` still in `send` (an out-of-place call must not write it). */
static const char* inputs_intact(ncclDataType_t t, abi_red_t red, int rank, int nranks,
                                 const void* send, size_t count, size_t first, unsigned salt) {
  static _Thread_local char msg[200];
  for (size_t k = 0; k < count; ++k) {
    double want = abi_red_input(t, red, rank, nranks, first + k, salt);
    double got = abi_load(t, send, k);
    if (got != want) {
      snprintf(msg, sizeof msg, "sendbuff element %zu changed from %g to %g", k, want, got);
      return msg;
    }
  }
  return NULL;
}

static void allreduce_case(ncclComm_t comm, int rank, int nranks, ncclDataType_t t, abi_red_t red,
                           size_t count, int inplace, unsigned salt) {
  size_t bytes = count * abi_type_size(t);
  void* send = abi_alloc(bytes);
  void* recv = inplace ? send : abi_alloc(bytes);
  abi_fill_red(t, red, rank, nranks, send, count, 0, salt);
  char what[200];
  snprintf(what, sizeof what, "ncclAllReduce(%s %s, count %zu, %s)", abi_red_name(red),
           abi_type_name(t), count, inplace ? "in place" : "out of place");
  ncclRedOp_t op = abi_builtin_op(red);
  int have_op = 1;
  if (red == ABI_PREMUL) {
    unsigned char scalar[8];
    abi_store(t, scalar, 0, ABI_PREMUL_SCALAR);
    have_op =
        NCCL_OK(ncclRedOpCreatePreMulSum(&op, scalar, t, ncclScalarHostImmediate, comm), comm);
    /* ncclScalarHostImmediate: read before the call returned. */
    memset(scalar, 0, sizeof scalar);
    if (have_op)
      CHECK((int)op >= (int)ncclNumOps, "ncclRedOpCreatePreMulSum gave op %d, a built-in value",
            (int)op);
  }
  if (have_op && abi_expect(ncclAllReduce(send, recv, count, t, op, comm, NULL), ncclSuccess, what,
                            comm, __FILE__, __LINE__)) {
    const char* err = abi_check_red(t, red, nranks, recv, count, 0, salt);
    CHECK(err == NULL, "%s: %s", what, err);
    if (!inplace) {
      err = inputs_intact(t, red, rank, nranks, send, count, 0, salt);
      CHECK(err == NULL, "%s: %s", what, err);
      err = abi_check_guards(send, bytes);
      CHECK(err == NULL, "%s: sendbuff %s", what, err);
    }
    err = abi_check_guards(recv, bytes);
    CHECK(err == NULL, "%s: recvbuff %s", what, err);
  }
  if (red == ABI_PREMUL && have_op) {
    NCCL_OK(ncclRedOpDestroy(op, comm), comm);
    /* A destroyed op is refused. */
    if (count == 1)
      NCCL_EXPECT(ncclAllReduce(send, recv, count, t, op, comm, NULL), ncclInvalidArgument, comm);
  }
  if (!inplace) abi_free(recv, bytes);
  abi_free(send, bytes);
}

void scenario_allreduce(const abi_rank_t* r) {
  ncclComm_t comm = abi_init_comm(r, 0);
  static const size_t counts[] = {1, 3, 1031, 65539};
  unsigned salt = 100;
  for (size_t ti = 0; ti < NTYPES; ++ti) {
    ncclDataType_t t = kAllTypes[ti];
    int fp8 = t == ncclFloat8e4m3 || t == ncclFloat8e5m2;
    for (int red = ABI_SUM; red <= ABI_AVG; ++red) {
      if (fp8 && red == ABI_AVG) continue; /* an fp8 average is not exact */
      for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ++ci)
        allreduce_case(comm, r->rank, r->nranks, t, (abi_red_t)red, counts[ci],
                       (int)((ci + (size_t)red) % 2), ++salt);
    }
  }
  /* Pre-multiplied sum with a host scalar. */
  static const ncclDataType_t premul_types[] = {ncclInt32,    ncclUint8,   ncclInt64,  ncclFloat16,
                                                ncclBfloat16, ncclFloat32, ncclFloat64};
  for (size_t ti = 0; ti < sizeof premul_types / sizeof premul_types[0]; ++ti) {
    allreduce_case(comm, r->rank, r->nranks, premul_types[ti], ABI_PREMUL, 1, 0, ++salt);
    allreduce_case(comm, r->rank, r->nranks, premul_types[ti], ABI_PREMUL, 4099, 1, ++salt);
  }
  /* One large odd count. */
  allreduce_case(comm, r->rank, r->nranks, ncclFloat32, ABI_SUM, 1000003, 0, ++salt);

  /* count 0: success, nothing written. */
  for (size_t ti = 0; ti < NTYPES; ++ti) {
    unsigned char* send = (unsigned char*)abi_alloc(64);
    unsigned char* recv = (unsigned char*)abi_alloc(64);
    char what[96];
    snprintf(what, sizeof what, "ncclAllReduce(%s, count 0)", abi_type_name(kAllTypes[ti]));
    if (abi_expect(ncclAllReduce(send, recv, 0, kAllTypes[ti], ncclSum, comm, NULL), ncclSuccess,
                   what, comm, __FILE__, __LINE__)) {
      const char* err = abi_check_untouched(recv, 64);
      CHECK(err == NULL, "%s: recvbuff %s", what, err);
    }
    abi_free(send, 64);
    abi_free(recv, 64);
  }

  /* The p-prefixed entry points are the same functions. */
  {
    int32_t in = r->rank + 1, out = 0;
    if (NCCL_OK(pncclAllReduce(&in, &out, 1, ncclInt32, ncclSum, comm, NULL), comm))
      CHECK(out == r->nranks * (r->nranks + 1) / 2, "pncclAllReduce gave %d, expected %d", out,
            r->nranks * (r->nranks + 1) / 2);
  }
  NCCL_OK(ncclCommDestroy(comm), NULL);
}

/* ---- every other collective ---- */

typedef struct {
  ncclComm_t comm;
  int rank, n;
  unsigned salt;
} coll_ctx_t;

static void broadcast_case(coll_ctx_t* c, ncclDataType_t t, size_t count, int root, int inplace,
                           int legacy_bcast) {
  size_t bytes = count * abi_type_size(t);
  unsigned salt = ++c->salt;
  int is_root = c->rank == root;
  void* recv = abi_alloc(bytes);
  void* send = recv;
  if (is_root && !inplace && !legacy_bcast) send = abi_alloc(bytes);
  if (!is_root && !inplace && !legacy_bcast) {
    send = abi_alloc(bytes); /* ignored on non-roots: garbage */
    abi_fill_pattern(send, bytes, c->rank, 99, salt);
  }
  if (is_root) abi_fill_pattern(send, bytes, root, 0, salt);
  char what[200];
  snprintf(what, sizeof what, "%s(%s, count %zu, root %d%s)",
           legacy_bcast ? "ncclBcast" : "ncclBroadcast", abi_type_name(t), count, root,
           legacy_bcast ? ""
           : inplace    ? ", in place"
                        : ", out of place");
  ncclResult_t res = legacy_bcast ? ncclBcast(recv, count, t, root, c->comm, NULL)
                                  : ncclBroadcast(send, recv, count, t, root, c->comm, NULL);
  if (abi_expect(res, ncclSuccess, what, c->comm, __FILE__, __LINE__)) {
    const char* err = abi_check_pattern(recv, bytes, root, 0, salt);
    CHECK(err == NULL, "%s: recvbuff %s", what, err);
    err = abi_check_guards(recv, bytes);
    CHECK(err == NULL, "%s: recvbuff %s", what, err);
    if (is_root && send != recv) {
      err = abi_check_pattern(send, bytes, root, 0, salt);
      CHECK(err == NULL, "%s: root's sendbuff changed: %s", what, err);
    }
  }
  if (send != recv) abi_free(send, bytes);
  abi_free(recv, bytes);
}

static void reduce_case(coll_ctx_t* c, ncclDataType_t t, abi_red_t red, size_t count, int root,
                        int inplace) {
  size_t bytes = count * abi_type_size(t);
  unsigned salt = ++c->salt;
  int is_root = c->rank == root;
  void* send = abi_alloc(bytes);
  abi_fill_red(t, red, c->rank, c->n, send, count, 0, salt);
  /* recvbuff may be NULL on non-roots (nccl.h). */
  void* recv = inplace ? send : is_root ? abi_alloc(bytes) : NULL;
  char what[200];
  snprintf(what, sizeof what, "ncclReduce(%s %s, count %zu, root %d, %s%s)", abi_red_name(red),
           abi_type_name(t), count, root, inplace ? "in place" : "out of place",
           !inplace && !is_root ? ", recvbuff NULL on this non-root" : "");
  if (abi_expect(ncclReduce(send, recv, count, t, abi_builtin_op(red), root, c->comm, NULL),
                 ncclSuccess, what, c->comm, __FILE__, __LINE__)) {
    if (is_root) {
      const char* err = abi_check_red(t, red, c->n, recv, count, 0, salt);
      CHECK(err == NULL, "%s: %s", what, err);
      err = abi_check_guards(recv, bytes);
      CHECK(err == NULL, "%s: recvbuff %s", what, err);
    }
    if (!inplace) {
      const char* err = inputs_intact(t, red, c->rank, c->n, send, count, 0, salt);
      CHECK(err == NULL, "%s: %s", what, err);
    }
  }
  if (recv != NULL && recv != send) abi_free(recv, bytes);
  abi_free(send, bytes);
}

static void allgather_case(coll_ctx_t* c, ncclDataType_t t, size_t count, int inplace) {
  size_t bytes = count * abi_type_size(t);
  unsigned salt = ++c->salt;
  unsigned char* recv = (unsigned char*)abi_alloc(bytes * (size_t)c->n);
  /* In place: sendbuff == recvbuff + rank * sendcount. */
  unsigned char* send = inplace ? recv + (size_t)c->rank * bytes : (unsigned char*)abi_alloc(bytes);
  abi_fill_pattern(send, bytes, c->rank, 0, salt);
  char what[200];
  snprintf(what, sizeof what, "ncclAllGather(%s, sendcount %zu, %s)", abi_type_name(t), count,
           inplace ? "in place" : "out of place");
  if (abi_expect(ncclAllGather(send, recv, count, t, c->comm, NULL), ncclSuccess, what, c->comm,
                 __FILE__, __LINE__)) {
    for (int j = 0; j < c->n; ++j) {
      const char* err = abi_check_pattern(recv + (size_t)j * bytes, bytes, j, 0, salt);
      CHECK(err == NULL, "%s: block of rank %d: %s", what, j, err);
    }
    const char* err = abi_check_guards(recv, bytes * (size_t)c->n);
    CHECK(err == NULL, "%s: recvbuff %s", what, err);
  }
  if (!inplace) abi_free(send, bytes);
  abi_free(recv, bytes * (size_t)c->n);
}

static void reduce_scatter_case(coll_ctx_t* c, ncclDataType_t t, abi_red_t red, size_t count,
                                int inplace) {
  size_t es = abi_type_size(t), bytes = count * es;
  unsigned salt = ++c->salt;
  unsigned char* send = (unsigned char*)abi_alloc(bytes * (size_t)c->n);
  abi_fill_red(t, red, c->rank, c->n, send, count * (size_t)c->n, 0, salt);
  /* In place: recvbuff == sendbuff + rank * recvcount. */
  unsigned char* recv = inplace ? send + (size_t)c->rank * bytes : (unsigned char*)abi_alloc(bytes);
  char what[200];
  snprintf(what, sizeof what, "ncclReduceScatter(%s %s, recvcount %zu, %s)", abi_red_name(red),
           abi_type_name(t), count, inplace ? "in place" : "out of place");
  if (abi_expect(ncclReduceScatter(send, recv, count, t, abi_builtin_op(red), c->comm, NULL),
                 ncclSuccess, what, c->comm, __FILE__, __LINE__)) {
    const char* err = abi_check_red(t, red, c->n, recv, count, (size_t)c->rank * count, salt);
    CHECK(err == NULL, "%s: %s", what, err);
    if (!inplace) {
      err = inputs_intact(t, red, c->rank, c->n, send, count * (size_t)c->n, 0, salt);
      CHECK(err == NULL, "%s: %s", what, err);
      err = abi_check_guards(recv, bytes);
      CHECK(err == NULL, "%s: recvbuff %s", what, err);
    }
    err = abi_check_guards(send, bytes * (size_t)c->n);
    CHECK(err == NULL, "%s: sendbuff %s", what, err);
  }
  if (!inplace) abi_free(recv, bytes);
  abi_free(send, bytes * (size_t)c->n);
}

static void alltoall_case(coll_ctx_t* c, ncclDataType_t t, size_t count) {
  size_t bytes = count * abi_type_size(t), total = bytes * (size_t)c->n;
  unsigned salt = ++c->salt;
  unsigned char* send = (unsigned char*)abi_alloc(total);
  unsigned char* recv = (unsigned char*)abi_alloc(total);
  for (int j = 0; j < c->n; ++j)
    abi_fill_pattern(send + (size_t)j * bytes, bytes, c->rank, j, salt);
  char what[200];
  snprintf(what, sizeof what, "ncclAlltoAll(%s, count %zu)", abi_type_name(t), count);
  if (abi_expect(ncclAlltoAll(send, recv, count, t, c->comm, NULL), ncclSuccess, what, c->comm,
                 __FILE__, __LINE__)) {
    for (int i = 0; i < c->n; ++i) {
      const char* err = abi_check_pattern(recv + (size_t)i * bytes, bytes, i, c->rank, salt);
      CHECK(err == NULL, "%s: block from rank %d: %s", what, i, err);
    }
    const char* err = abi_check_guards(recv, total);
    CHECK(err == NULL, "%s: recvbuff %s", what, err);
  }
  abi_free(send, total);
  abi_free(recv, total);
}

static void gather_case(coll_ctx_t* c, ncclDataType_t t, size_t count, int root, int inplace) {
  size_t bytes = count * abi_type_size(t), total = bytes * (size_t)c->n;
  unsigned salt = ++c->salt;
  int is_root = c->rank == root;
  /* recvbuff is not used on non-roots: NULL there. */
  unsigned char* recv = is_root ? (unsigned char*)abi_alloc(total) : NULL;
  /* In place (root): sendbuff == recvbuff + root * count. */
  int root_inplace = inplace && is_root;
  unsigned char* send =
      root_inplace ? recv + (size_t)root * bytes : (unsigned char*)abi_alloc(bytes);
  abi_fill_pattern(send, bytes, c->rank, 0, salt);
  char what[200];
  snprintf(what, sizeof what, "ncclGather(%s, count %zu, root %d, %s)", abi_type_name(t), count,
           root, inplace ? "in place on the root" : "out of place");
  if (abi_expect(ncclGather(send, recv, count, t, root, c->comm, NULL), ncclSuccess, what, c->comm,
                 __FILE__, __LINE__) &&
      is_root) {
    for (int j = 0; j < c->n; ++j) {
      const char* err = abi_check_pattern(recv + (size_t)j * bytes, bytes, j, 0, salt);
      CHECK(err == NULL, "%s: block of rank %d: %s", what, j, err);
    }
    const char* err = abi_check_guards(recv, total);
    CHECK(err == NULL, "%s: recvbuff %s", what, err);
  }
  if (!root_inplace) abi_free(send, bytes);
  if (recv) abi_free(recv, total);
}

static void scatter_case(coll_ctx_t* c, ncclDataType_t t, size_t count, int root, int inplace) {
  size_t bytes = count * abi_type_size(t), total = bytes * (size_t)c->n;
  unsigned salt = ++c->salt;
  int is_root = c->rank == root;
  /* sendbuff is not used on non-roots: NULL there. */
  unsigned char* send = is_root ? (unsigned char*)abi_alloc(total) : NULL;
  if (is_root)
    for (int j = 0; j < c->n; ++j) abi_fill_pattern(send + (size_t)j * bytes, bytes, root, j, salt);
  /* In place (root): recvbuff == sendbuff + root * count. */
  int root_inplace = inplace && is_root;
  unsigned char* recv =
      root_inplace ? send + (size_t)root * bytes : (unsigned char*)abi_alloc(bytes);
  char what[200];
  snprintf(what, sizeof what, "ncclScatter(%s, count %zu, root %d, %s)", abi_type_name(t), count,
           root, inplace ? "in place on the root" : "out of place");
  if (abi_expect(ncclScatter(send, recv, count, t, root, c->comm, NULL), ncclSuccess, what, c->comm,
                 __FILE__, __LINE__)) {
    const char* err = abi_check_pattern(recv, bytes, root, c->rank, salt);
    CHECK(err == NULL, "%s: recvbuff %s", what, err);
    if (is_root) {
      for (int j = 0; j < c->n; ++j) {
        err = abi_check_pattern(send + (size_t)j * bytes, bytes, root, j, salt);
        CHECK(err == NULL, "%s: root's sendbuff block %d changed: %s", what, j, err);
      }
    }
    if (!root_inplace) {
      err = abi_check_guards(recv, bytes);
      CHECK(err == NULL, "%s: recvbuff %s", what, err);
    }
  }
  if (!root_inplace) abi_free(recv, bytes);
  if (send) abi_free(send, total);
}

/* Each rank sends to rank+1 and receives from rank-1 in one group. */
static void ring_case(coll_ctx_t* c, ncclDataType_t t, size_t count) {
  size_t bytes = count * abi_type_size(t);
  unsigned salt = ++c->salt;
  int next = (c->rank + 1) % c->n, prev = (c->rank + c->n - 1) % c->n;
  void* send = abi_alloc(bytes);
  void* recv = abi_alloc(bytes);
  abi_fill_pattern(send, bytes, c->rank, next, salt);
  char what[200];
  snprintf(what, sizeof what, "ring ncclSend/ncclRecv(%s, count %zu) in a group", abi_type_name(t),
           count);
  int ok = NCCL_OK(ncclGroupStart(), NULL);
  ok &= NCCL_OK(ncclSend(send, count, t, next, c->comm, NULL), c->comm);
  ok &= NCCL_OK(ncclRecv(recv, count, t, prev, c->comm, NULL), c->comm);
  ok &= abi_expect(ncclGroupEnd(), ncclSuccess, what, c->comm, __FILE__, __LINE__);
  if (ok) {
    const char* err = abi_check_pattern(recv, bytes, prev, c->rank, salt);
    CHECK(err == NULL, "%s: %s", what, err);
    err = abi_check_guards(recv, bytes);
    CHECK(err == NULL, "%s: recvbuff %s", what, err);
  }
  abi_free(send, bytes);
  abi_free(recv, bytes);
}

/* Pairs (0,1), (2,3)...: blocking ncclSend/ncclRecv outside a group, in
 * matching order (the even rank sends first). */
static void pair_case(coll_ctx_t* c, ncclDataType_t t, size_t count) {
  size_t bytes = count * abi_type_size(t);
  unsigned salt = ++c->salt;
  int peer = c->rank ^ 1;
  if (peer >= c->n) return;
  void* send = abi_alloc(bytes);
  void* recv = abi_alloc(bytes);
  abi_fill_pattern(send, bytes, c->rank, peer, salt);
  int ok;
  if (c->rank % 2 == 0) {
    ok = NCCL_OK(ncclSend(send, count, t, peer, c->comm, NULL), c->comm);
    ok &= NCCL_OK(ncclRecv(recv, count, t, peer, c->comm, NULL), c->comm);
  } else {
    ok = NCCL_OK(ncclRecv(recv, count, t, peer, c->comm, NULL), c->comm);
    ok &= NCCL_OK(ncclSend(send, count, t, peer, c->comm, NULL), c->comm);
  }
  if (ok) {
    const char* err = abi_check_pattern(recv, bytes, peer, c->rank, salt);
    CHECK(err == NULL, "ncclSend/ncclRecv outside a group (%s, count %zu): %s", abi_type_name(t),
          count, err);
  }
  abi_free(send, bytes);
  abi_free(recv, bytes);
}

/* count 0 for every collective: success, and nothing written. */
static void zero_count_cases(coll_ctx_t* c) {
  const size_t B = 256;
  unsigned char* a = (unsigned char*)abi_alloc(B);
  unsigned char* b = (unsigned char*)abi_alloc(B);
  ncclComm_t comm = c->comm;
  int root = c->n - 1, next = (c->rank + 1) % c->n, prev = (c->rank + c->n - 1) % c->n;
  NCCL_OK(ncclAllReduce(a, b, 0, ncclFloat32, ncclSum, comm, NULL), comm);
  NCCL_OK(ncclBroadcast(a, b, 0, ncclFloat32, root, comm, NULL), comm);
  NCCL_OK(ncclBcast(b, 0, ncclFloat32, root, comm, NULL), comm);
  NCCL_OK(ncclReduce(a, b, 0, ncclFloat32, ncclSum, root, comm, NULL), comm);
  NCCL_OK(ncclAllGather(a, b, 0, ncclFloat32, comm, NULL), comm);
  NCCL_OK(ncclReduceScatter(a, b, 0, ncclFloat32, ncclSum, comm, NULL), comm);
  NCCL_OK(ncclAlltoAll(a, b, 0, ncclFloat32, comm, NULL), comm);
  NCCL_OK(ncclGather(a, b, 0, ncclFloat32, root, comm, NULL), comm);
  NCCL_OK(ncclScatter(a, b, 0, ncclFloat32, root, comm, NULL), comm);
  NCCL_OK(ncclGroupStart(), NULL);
  NCCL_OK(ncclSend(a, 0, ncclFloat32, next, comm, NULL), comm);
  NCCL_OK(ncclRecv(b, 0, ncclFloat32, prev, comm, NULL), comm);
  NCCL_OK(ncclGroupEnd(), comm);
  const char* err = abi_check_untouched(b, B);
  CHECK(err == NULL, "collectives with count 0: recvbuff %s", err);
  err = abi_check_untouched(a, B);
  CHECK(err == NULL, "collectives with count 0: sendbuff %s", err);
  abi_free(a, B);
  abi_free(b, B);
}

void scenario_collectives(const abi_rank_t* r) {
  coll_ctx_t c = {abi_init_comm(r, 0), r->rank, r->nranks, 1000};
  static const ncclDataType_t types[] = {ncclUint8, ncclFloat64};
  static const size_t counts[] = {1, 3, 4099, 100003};
  for (size_t ti = 0; ti < 2; ++ti) {
    ncclDataType_t t = types[ti];
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ++ci) {
      size_t n = counts[ci];
      for (int root = 0; root < c.n; ++root)
        for (int inplace = 0; inplace < 2; ++inplace) {
          broadcast_case(&c, t, n, root, inplace, 0);
          reduce_case(&c, t, inplace ? ABI_MAX : ABI_SUM, n, root, inplace);
          gather_case(&c, t, n, root, inplace);
          scatter_case(&c, t, n, root, inplace);
        }
      for (int root = 0; root < c.n; ++root) broadcast_case(&c, t, n, root, 1, 1);
      for (int inplace = 0; inplace < 2; ++inplace) {
        allgather_case(&c, t, n, inplace);
        reduce_scatter_case(&c, t, inplace ? ABI_MIN : ABI_SUM, n, inplace);
      }
      alltoall_case(&c, t, n);
      ring_case(&c, t, n);
      pair_case(&c, t, n);
    }
  }
  /* Reductions in a few more datatypes. */
  static const ncclDataType_t red_types[] = {ncclInt8,    ncclInt32,    ncclUint64,
                                             ncclFloat16, ncclBfloat16, ncclFloat32};
  for (size_t ti = 0; ti < sizeof red_types / sizeof red_types[0]; ++ti) {
    reduce_case(&c, red_types[ti], ABI_PROD, 1031, c.n - 1, 0);
    reduce_scatter_case(&c, red_types[ti], ABI_AVG, 1031, (int)(ti % 2));
  }
  zero_count_cases(&c);

  ncclResult_t state = ncclInternalError;
  if (NCCL_OK(ncclCommGetAsyncError(c.comm, &state), c.comm))
    CHECK(state == ncclSuccess, "ncclCommGetAsyncError: state %d (%s) after good calls", (int)state,
          ncclGetErrorString(state));
  /* Orderly shutdown: finalize (blocking comm: done when it returns), destroy. */
  if (NCCL_OK(ncclCommFinalize(c.comm), c.comm)) {
    state = abi_wait_settled(c.comm, 20);
    CHECK(state == ncclSuccess, "after ncclCommFinalize the state is %d (%s), expected success",
          (int)state, ncclGetErrorString(state));
  }
  NCCL_OK(ncclCommDestroy(c.comm), NULL);
}

/* ---- groups ---- */

void scenario_groups(const abi_rank_t* r) {
  ncclComm_t comm = abi_init_comm(r, 0);
  int rank = r->rank, n = r->nranks;
  coll_ctx_t c = {comm, rank, n, 5000};

  /* Several collectives and a send/recv to self in one group. */
  {
    const size_t ca = 1001, cb = 333, cc = 77, cd = 55, cs = 129;
    float* a_send = (float*)abi_alloc(ca * 4);
    float* a_recv = (float*)abi_alloc(ca * 4);
    unsigned char* b = (unsigned char*)abi_alloc(cb);
    int32_t* c_send = (int32_t*)abi_alloc(cc * 4);
    int32_t* c_recv = (int32_t*)abi_alloc(cc * 4 * (size_t)n);
    int64_t* d_send = (int64_t*)abi_alloc(cd * 8 * (size_t)n);
    int64_t* d_recv = (int64_t*)abi_alloc(cd * 8);
    double* s_send = (double*)abi_alloc(cs * 8);
    double* s_recv = (double*)abi_alloc(cs * 8);
    abi_fill_red(ncclFloat32, ABI_SUM, rank, n, a_send, ca, 0, 1);
    int broot = 1 % n;
    if (rank == broot) abi_fill_pattern(b, cb, broot, 0, 2);
    abi_fill_pattern(c_send, cc * 4, rank, 0, 3);
    abi_fill_red(ncclInt64, ABI_MAX, rank, n, d_send, cd * (size_t)n, 0, 4);
    abi_fill_pattern(s_send, cs * 8, rank, rank, 5);

    int ok = NCCL_OK(ncclGroupStart(), NULL);
    ok &= NCCL_OK(ncclAllReduce(a_send, a_recv, ca, ncclFloat32, ncclSum, comm, NULL), comm);
    ok &= NCCL_OK(ncclBroadcast(b, b, cb, ncclUint8, broot, comm, NULL), comm);
    ok &= NCCL_OK(ncclAllGather(c_send, c_recv, cc, ncclInt32, comm, NULL), comm);
    ok &= NCCL_OK(ncclReduceScatter(d_send, d_recv, cd, ncclInt64, ncclMax, comm, NULL), comm);
    ok &= NCCL_OK(ncclSend(s_send, cs, ncclFloat64, rank, comm, NULL), comm);
    ok &= NCCL_OK(ncclRecv(s_recv, cs, ncclFloat64, rank, comm, NULL), comm);
    /* Nothing runs before ncclGroupEnd. */
    const char* err = abi_check_untouched(a_recv, ca * 4);
    CHECK(err == NULL, "group: all-reduce recvbuff written before ncclGroupEnd: %s", err);
    ok &= NCCL_OK(ncclGroupEnd(), comm);
    if (ok) {
      err = abi_check_red(ncclFloat32, ABI_SUM, n, a_recv, ca, 0, 1);
      CHECK(err == NULL, "group: all-reduce: %s", err);
      err = abi_check_pattern(b, cb, broot, 0, 2);
      CHECK(err == NULL, "group: broadcast: %s", err);
      for (int j = 0; j < n; ++j) {
        err = abi_check_pattern(c_recv + (size_t)j * cc, cc * 4, j, 0, 3);
        CHECK(err == NULL, "group: all-gather block %d: %s", j, err);
      }
      err = abi_check_red(ncclInt64, ABI_MAX, n, d_recv, cd, (size_t)rank * cd, 4);
      CHECK(err == NULL, "group: reduce-scatter: %s", err);
      err = abi_check_pattern(s_recv, cs * 8, rank, rank, 5);
      CHECK(err == NULL, "group: send/recv to self: %s", err);
    }
    abi_free(a_send, ca * 4);
    abi_free(a_recv, ca * 4);
    abi_free(b, cb);
    abi_free(c_send, cc * 4);
    abi_free(c_recv, cc * 4 * (size_t)n);
    abi_free(d_send, cd * 8 * (size_t)n);
    abi_free(d_recv, cd * 8);
    abi_free(s_send, cs * 8);
    abi_free(s_recv, cs * 8);
  }

  /* Send/recv to self alone in a group (receive posted first). */
  {
    const size_t cnt = 4097;
    void* s = abi_alloc(cnt * 4);
    void* d = abi_alloc(cnt * 4);
    abi_fill_pattern(s, cnt * 4, rank, rank, 6);
    int ok = NCCL_OK(ncclGroupStart(), NULL);
    ok &= NCCL_OK(ncclRecv(d, cnt, ncclInt32, rank, comm, NULL), comm);
    ok &= NCCL_OK(ncclSend(s, cnt, ncclInt32, rank, comm, NULL), comm);
    ok &= NCCL_OK(ncclGroupEnd(), comm);
    if (ok) {
      const char* err = abi_check_pattern(d, cnt * 4, rank, rank, 6);
      CHECK(err == NULL, "send/recv to self in a group: %s", err);
    }
    abi_free(s, cnt * 4);
    abi_free(d, cnt * 4);
  }

  /* Every pair, self included, in one group: an all-to-all by send/recv,
   * with a different count per pair. */
  {
    size_t cnt[ABI_MAX_RANKS], rcnt[ABI_MAX_RANKS];
    void* s[ABI_MAX_RANKS];
    void* d[ABI_MAX_RANKS];
    for (int p = 0; p < n; ++p) {
      cnt[p] = 100 + (size_t)(rank * 7 + p * 13);  /* what I send to p */
      rcnt[p] = 100 + (size_t)(p * 7 + rank * 13); /* what p sends to me */
      s[p] = abi_alloc(cnt[p] * 8);
      d[p] = abi_alloc(rcnt[p] * 8);
      abi_fill_pattern(s[p], cnt[p] * 8, rank, p, 7);
    }
    int ok = NCCL_OK(ncclGroupStart(), NULL);
    for (int p = 0; p < n; ++p) {
      ok &= NCCL_OK(ncclSend(s[p], cnt[p], ncclUint64, p, comm, NULL), comm);
      ok &= NCCL_OK(ncclRecv(d[p], rcnt[p], ncclUint64, p, comm, NULL), comm);
    }
    ok &= NCCL_OK(ncclGroupEnd(), comm);
    for (int p = 0; p < n; ++p) {
      if (ok) {
        const char* err = abi_check_pattern(d[p], rcnt[p] * 8, p, rank, 7);
        CHECK(err == NULL, "all-pairs send/recv group: from rank %d: %s", p, err);
      }
      abi_free(s[p], cnt[p] * 8);
      abi_free(d[p], rcnt[p] * 8);
    }
  }

  /* Nested groups: the work runs at the outermost ncclGroupEnd. */
  {
    const size_t cnt = 513;
    float* s = (float*)abi_alloc(cnt * 4);
    float* d = (float*)abi_alloc(cnt * 4);
    abi_fill_red(ncclFloat32, ABI_SUM, rank, n, s, cnt, 0, 8);
    int ok = NCCL_OK(ncclGroupStart(), NULL);
    ok &= NCCL_OK(ncclGroupStart(), NULL);
    ok &= NCCL_OK(ncclAllReduce(s, d, cnt, ncclFloat32, ncclSum, comm, NULL), comm);
    ok &= NCCL_OK(ncclGroupEnd(), comm);
    const char* err = abi_check_untouched(d, cnt * 4);
    CHECK(err == NULL, "nested group: recvbuff written at the inner ncclGroupEnd: %s", err);
    ok &= NCCL_OK(ncclGroupEnd(), comm);
    if (ok) {
      err = abi_check_red(ncclFloat32, ABI_SUM, n, d, cnt, 0, 8);
      CHECK(err == NULL, "nested group: %s", err);
    }
    abi_free(s, cnt * 4);
    abi_free(d, cnt * 4);
  }

  /* Many small all-reduces of different sizes in one group. */
  {
    enum { K = 16 };
    void* s[K];
    void* d[K];
    size_t cnt[K];
    int ok = NCCL_OK(ncclGroupStart(), NULL);
    for (int k = 0; k < K; ++k) {
      cnt[k] = 1 + (size_t)k * 37;
      s[k] = abi_alloc(cnt[k] * 4);
      d[k] = abi_alloc(cnt[k] * 4);
      abi_fill_red(ncclInt32, ABI_SUM, rank, n, s[k], cnt[k], 0, 100 + (unsigned)k);
      ok &= NCCL_OK(ncclAllReduce(s[k], d[k], cnt[k], ncclInt32, ncclSum, comm, NULL), comm);
    }
    ok &= NCCL_OK(ncclGroupEnd(), comm);
    for (int k = 0; k < K; ++k) {
      if (ok) {
        const char* err = abi_check_red(ncclInt32, ABI_SUM, n, d[k], cnt[k], 0, 100 + (unsigned)k);
        CHECK(err == NULL, "group of %d all-reduces: #%d: %s", K, k, err);
      }
      abi_free(s[k], cnt[k] * 4);
      abi_free(d[k], cnt[k] * 4);
    }
  }

  /* An empty group is fine. */
  NCCL_OK(ncclGroupStart(), NULL);
  NCCL_OK(ncclGroupEnd(), NULL);

  /* The communicator still works outside groups. */
  ring_case(&c, ncclInt32, 1000);
  int members[ABI_MAX_RANKS];
  for (int i = 0; i < n; ++i) members[i] = i;
  abi_allreduce_ok(comm, members, n, rank, 9, "after the groups");
  NCCL_OK(ncclCommDestroy(comm), NULL);
}

/* ---- main ---- */

typedef struct {
  const char* name;
  int nranks; /* 0: from argv (1..ABI_MAX_RANKS) */
  int nids;
  int watchdog;
  unsigned expect_killed;
  abi_body_fn body;
  const char* covers;
} scenario_t;

static const scenario_t kScenarios[] = {
    {"allreduce", 0, 1, 50, 0, scenario_allreduce,
     "all-reduce: sum/prod/max/min/avg x 12 datatypes, premulsum, odd counts, count 0, in place"},
    {"collectives", 0, 1, 50, 0, scenario_collectives,
     "broadcast, bcast, reduce, all-gather, reduce-scatter, all-to-all, gather, scatter, "
     "send/recv; in place; count 0; finalize"},
    {"groups", 3, 1, 50, 0, scenario_groups,
     "several collectives in one group, send/recv to self, all-pairs, nested groups"},
    {"init-all", 1, 0, 50, 0, scenario_init_all, "ncclCommInitAll(3, NULL): groups and threads"},
    {"init-in-group", 1, 1, 50, 0, scenario_init_in_group,
     "two ncclCommInitRank in one group in one process"},
    {"nonblocking", 2, 1, 50, 0, scenario_nonblocking,
     "config.blocking = 0: ncclInProgress and ncclCommGetAsyncError; commName"},
    {"scalable", 3, 3, 50, 0, scenario_scalable, "ncclCommInitRankScalable with nId 1 and 2"},
    {"split", 3, 1, 50, 0, scenario_split, "ncclCommSplit: colours, keys, NCCL_SPLIT_NOCOLOR"},
    {"shrink", 3, 1, 50, 0, scenario_shrink, "ncclCommShrink(NCCL_SHRINK_DEFAULT)"},
    {"shrink-after-kill", 3, 1, 50, 1u << 1, scenario_shrink_after_kill,
     "SIGKILL of a rank, the survivors' errors, ncclCommShrink(NCCL_SHRINK_ABORT)"},
    {"abort", 2, 1, 50, 0, scenario_abort, "ncclCommAbort from another thread unblocks ncclRecv"},
#ifdef NCCL_REVOKE_DEFAULT
    {"revoke", 2, 2, 50, 0, scenario_revoke, "ncclCommRevoke"},
#endif
    {"simulate", 2, 1, 50, 0, scenario_simulate, "ncclGroupSimulateEnd"},
    {"register", 2, 1, 50, 0, scenario_register,
     "ncclCommRegister/Deregister, ncclCommWindowRegister/Deregister"},
    {"queries", 1, 1, 50, 0, scenario_queries,
     "version, error strings, count/rank/device, ncclMemAlloc, ncclDevComm*, finalize"},
    {"errors", 2, 1, 50, 0, scenario_errors,
     "NULL/destroyed comm, bad datatype/op/root/peer, NULL buffers, bad config"},
    {"comm-id", 3, 0, 50, 0, scenario_comm_id,
     "NCCL_COMM_ID: ids derived alike by every rank, the root started by rank 0"},
};

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  size_t nscen = sizeof kScenarios / sizeof kScenarios[0];
  if (argc < 2 || strcmp(argv[1], "--list") == 0) {
    printf("usage: %s <scenario> [nranks]\n", argv[0]);
    for (size_t i = 0; i < nscen; ++i)
      printf("  %-18s %s\n", kScenarios[i].name, kScenarios[i].covers);
    return argc < 2 ? 2 : 0;
  }
  const scenario_t* s = NULL;
  for (size_t i = 0; i < nscen; ++i)
    if (strcmp(argv[1], kScenarios[i].name) == 0) s = &kScenarios[i];
  if (s == NULL) {
    printf("FAIL: unknown scenario '%s' (--list shows them)\n", argv[1]);
    return 2;
  }
  abi_run_opts_t opts;
  memset(&opts, 0, sizeof opts);
  opts.nranks = s->nranks;
  if (s->nranks == 0) opts.nranks = argc > 2 ? atoi(argv[2]) : 2;
  opts.nids = s->nids;
  opts.watchdog_seconds = s->watchdog;
  opts.expect_killed = s->expect_killed;
  if (opts.nranks < 1 || opts.nranks > 4) {
    printf("FAIL: nranks must be 1..4\n");
    return 2;
  }
  /* Small library timeout: a missing peer fails a call in seconds, well
   * inside the watchdog. */
  setenv("LANES_TIMEOUT", "10", 1);
  if (s->body == scenario_comm_id) prepare_comm_id();
  return abi_run(s->name, &opts, s->body) ? 1 : 0;
}
