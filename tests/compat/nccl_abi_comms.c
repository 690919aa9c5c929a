/* NCCL ABI test scenarios about communicators: creation (ncclCommInitAll,
 * init in a group, non-blocking, scalable), split, shrink (also after a rank
 * was killed), abort, revoke, simulated groups, registration, queries and the
 * error paths. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nccl_abi_test.h"

static void iota(int* v, int n) {
  for (int i = 0; i < n; ++i) v[i] = i;
}

/* ---- ncclCommInitAll: 3 host ranks in one process ---- */

#define INIT_ALL_N 3

typedef struct {
  ncclComm_t comm;
  int rank;
} thread_rank_t;

static void* init_all_thread(void* p) {
  thread_rank_t* tr = (thread_rank_t*)p;
  int members[INIT_ALL_N];
  iota(members, INIT_ALL_N);
  char what[64];
  snprintf(what, sizeof what, "ncclCommInitAll thread rank %d", tr->rank);
  abi_allreduce_ok(tr->comm, members, INIT_ALL_N, tr->rank, 20, what);
  abi_order_ok(tr->comm, members, INIT_ALL_N, tr->rank, what);
  /* reduce-scatter avg of int32 */
  const size_t cnt = 257;
  void* s = abi_alloc(cnt * 4 * INIT_ALL_N);
  void* d = abi_alloc(cnt * 4);
  abi_fill_red(ncclInt32, ABI_AVG, tr->rank, INIT_ALL_N, s, cnt * INIT_ALL_N, 0, 21);
  if (NCCL_OK(ncclReduceScatter(s, d, cnt, ncclInt32, ncclAvg, tr->comm, NULL), tr->comm)) {
    const char* err =
        abi_check_red(ncclInt32, ABI_AVG, INIT_ALL_N, d, cnt, (size_t)tr->rank * cnt, 21);
    CHECK(err == NULL, "%s: reduce-scatter: %s", what, err);
  }
  abi_free(s, cnt * 4 * INIT_ALL_N);
  abi_free(d, cnt * 4);
  /* a send/recv ring in a group, per thread */
  int next = (tr->rank + 1) % INIT_ALL_N, prev = (tr->rank + INIT_ALL_N - 1) % INIT_ALL_N;
  void* ss = abi_alloc(999);
  void* rr = abi_alloc(999);
  abi_fill_pattern(ss, 999, tr->rank, next, 22);
  int ok = NCCL_OK(ncclGroupStart(), NULL);
  ok &= NCCL_OK(ncclSend(ss, 999, ncclUint8, next, tr->comm, NULL), tr->comm);
  ok &= NCCL_OK(ncclRecv(rr, 999, ncclUint8, prev, tr->comm, NULL), tr->comm);
  ok &= NCCL_OK(ncclGroupEnd(), tr->comm);
  if (ok) {
    const char* err = abi_check_pattern(rr, 999, prev, tr->rank, 22);
    CHECK(err == NULL, "%s: ring: %s", what, err);
  }
  abi_free(ss, 999);
  abi_free(rr, 999);
  return NULL;
}

void scenario_init_all(const abi_rank_t* r) {
  (void)r;
  ncclComm_t comms[INIT_ALL_N] = {NULL, NULL, NULL};
  NCCL_REQUIRE(ncclCommInitAll(comms, INIT_ALL_N, NULL), NULL);
  for (int i = 0; i < INIT_ALL_N; ++i) {
    REQUIRE(comms[i] != NULL, "ncclCommInitAll left comm[%d] NULL", i);
    abi_check_comm_shape(comms[i], INIT_ALL_N, i, "ncclCommInitAll");
  }
  int members[INIT_ALL_N];
  iota(members, INIT_ALL_N);

  /* Driven from this one thread through a group. */
  const size_t cnt = 4099;
  void* s[INIT_ALL_N];
  void* d[INIT_ALL_N];
  int ok = NCCL_OK(ncclGroupStart(), NULL);
  for (int i = 0; i < INIT_ALL_N; ++i) {
    s[i] = abi_alloc(cnt * 8);
    d[i] = abi_alloc(cnt * 8);
    abi_fill_red(ncclFloat64, ABI_SUM, i, INIT_ALL_N, s[i], cnt, 0, 10);
    ok &= NCCL_OK(ncclAllReduce(s[i], d[i], cnt, ncclFloat64, ncclSum, comms[i], NULL), comms[i]);
  }
  ok &= NCCL_OK(ncclGroupEnd(), NULL);
  for (int i = 0; i < INIT_ALL_N; ++i) {
    if (ok) {
      const char* err = abi_check_red(ncclFloat64, ABI_SUM, INIT_ALL_N, d[i], cnt, 0, 10);
      CHECK(err == NULL, "ncclCommInitAll group all-reduce on comm[%d]: %s", i, err);
    }
    abi_free(s[i], cnt * 8);
    abi_free(d[i], cnt * 8);
  }
  /* Broadcast from rank 2 and all-gather, one group each. */
  {
    void* b[INIT_ALL_N];
    ok = NCCL_OK(ncclGroupStart(), NULL);
    for (int i = 0; i < INIT_ALL_N; ++i) {
      b[i] = abi_alloc(777);
      if (i == 2) abi_fill_pattern(b[i], 777, 2, 0, 11);
      ok &= NCCL_OK(ncclBroadcast(b[i], b[i], 777, ncclInt8, 2, comms[i], NULL), comms[i]);
    }
    ok &= NCCL_OK(ncclGroupEnd(), NULL);
    for (int i = 0; i < INIT_ALL_N; ++i) {
      if (ok) {
        const char* err = abi_check_pattern(b[i], 777, 2, 0, 11);
        CHECK(err == NULL, "ncclCommInitAll group broadcast on comm[%d]: %s", i, err);
      }
      abi_free(b[i], 777);
    }
  }

  /* Driven from one thread per rank. */
  pthread_t th[INIT_ALL_N];
  thread_rank_t tr[INIT_ALL_N];
  for (int i = 0; i < INIT_ALL_N; ++i) {
    tr[i].comm = comms[i];
    tr[i].rank = i;
    REQUIRE(pthread_create(&th[i], NULL, init_all_thread, &tr[i]) == 0, "pthread_create");
  }
  for (int i = 0; i < INIT_ALL_N; ++i) pthread_join(th[i], NULL);

  for (int i = 0; i < INIT_ALL_N; ++i) NCCL_OK(ncclCommDestroy(comms[i]), NULL);
}

/* ---- two ranks created in one group by one process ---- */

void scenario_init_in_group(const abi_rank_t* r) {
  ncclComm_t c[2] = {NULL, NULL};
  int ok = NCCL_OK(ncclGroupStart(), NULL);
  ok &= NCCL_OK(ncclCommInitRank(&c[0], 2, r->ids[0], 0), NULL);
  ok &= NCCL_OK(ncclCommInitRank(&c[1], 2, r->ids[0], 1), NULL);
  ok &= NCCL_OK(ncclGroupEnd(), NULL);
  REQUIRE(ok, "creating two ranks in one group failed");
  REQUIRE(c[0] != NULL && c[1] != NULL, "ncclGroupEnd returned but a communicator is NULL");
  for (int i = 0; i < 2; ++i) {
    ncclResult_t state = ncclInternalError;
    if (NCCL_OK(ncclCommGetAsyncError(c[i], &state), c[i]))
      CHECK(state == ncclSuccess, "comm %d after ncclGroupEnd: state %d (%s), expected ready", i,
            (int)state, ncclGetErrorString(state));
    abi_check_comm_shape(c[i], 2, i, "init in a group");
  }
  const size_t cnt = 1000;
  void* s[2];
  void* d[2];
  ok = NCCL_OK(ncclGroupStart(), NULL);
  for (int i = 0; i < 2; ++i) {
    s[i] = abi_alloc(cnt * 4);
    d[i] = abi_alloc(cnt * 4);
    abi_fill_red(ncclUint32, ABI_MAX, i, 2, s[i], cnt, 0, 30);
    ok &= NCCL_OK(ncclAllReduce(s[i], d[i], cnt, ncclUint32, ncclMax, c[i], NULL), c[i]);
  }
  ok &= NCCL_OK(ncclGroupEnd(), NULL);
  for (int i = 0; i < 2; ++i) {
    if (ok) {
      const char* err = abi_check_red(ncclUint32, ABI_MAX, 2, d[i], cnt, 0, 30);
      CHECK(err == NULL, "init in a group: all-reduce on comm %d: %s", i, err);
    }
    abi_free(s[i], cnt * 4);
    abi_free(d[i], cnt * 4);
  }
  NCCL_OK(ncclCommDestroy(c[0]), NULL);
  NCCL_OK(ncclCommDestroy(c[1]), NULL);
}

/* ---- non-blocking communicator ---- */

void scenario_nonblocking(const abi_rank_t* r) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = "abi-nonblocking";
  ncclComm_t comm = NULL;
  ncclResult_t res = ncclCommInitRankConfig(&comm, r->nranks, r->ids[0], r->rank, &config);
  REQUIRE(NCCL_EXPECT2(res, ncclSuccess, ncclInProgress, comm),
          "non-blocking ncclCommInitRankConfig failed");
  abi_note("non-blocking ncclCommInitRankConfig returned %d (%s)", (int)res,
           ncclGetErrorString(res));
  REQUIRE(comm != NULL, "non-blocking ncclCommInitRankConfig returned %d but left *comm NULL",
          (int)res);
  ncclResult_t state = abi_wait_settled(comm, 20);
  REQUIRE(state == ncclSuccess, "non-blocking init settled at %d (%s), expected success: %s",
          (int)state, ncclGetErrorString(state), ncclGetLastError(comm));
  abi_check_comm_shape(comm, r->nranks, r->rank, "non-blocking init");

  int members[ABI_MAX_RANKS];
  iota(members, r->nranks);
  const size_t cnt = 2049;
  void* s = abi_alloc(cnt * 4);
  void* d = abi_alloc(cnt * 4);
  abi_fill_red(ncclFloat32, ABI_SUM, r->rank, r->nranks, s, cnt, 0, 40);
  res = ncclAllReduce(s, d, cnt, ncclFloat32, ncclSum, comm, NULL);
  if (NCCL_EXPECT2(res, ncclSuccess, ncclInProgress, comm)) {
    state = abi_wait_settled(comm, 20);
    if (CHECK(state == ncclSuccess, "all-reduce on a non-blocking comm settled at %d (%s): %s",
              (int)state, ncclGetErrorString(state), ncclGetLastError(comm))) {
      const char* err = abi_check_red(ncclFloat32, ABI_SUM, r->nranks, d, cnt, 0, 40);
      CHECK(err == NULL, "all-reduce on a non-blocking comm: %s", err);
    }
  }
  abi_free(s, cnt * 4);
  abi_free(d, cnt * 4);

  /* Finalize may answer ncclInProgress; the state then settles at success. */
  res = ncclCommFinalize(comm);
  if (NCCL_EXPECT2(res, ncclSuccess, ncclInProgress, comm)) {
    state = abi_wait_settled(comm, 20);
    CHECK(state == ncclSuccess, "non-blocking finalize settled at %d (%s)", (int)state,
          ncclGetErrorString(state));
  }
  NCCL_OK(ncclCommDestroy(comm), NULL);
}

/* ---- ncclCommInitRankScalable ---- */

void scenario_scalable(const abi_rank_t* r) {
  int members[ABI_MAX_RANKS];
  iota(members, r->nranks);
  {
    ncclComm_t comm = NULL;
    ncclUniqueId one = r->ids[0];
    NCCL_REQUIRE(ncclCommInitRankScalable(&comm, r->nranks, r->rank, 1, &one, NULL), NULL);
    REQUIRE(comm != NULL, "ncclCommInitRankScalable(nId 1) left *comm NULL");
    abi_check_comm_shape(comm, r->nranks, r->rank, "ncclCommInitRankScalable(nId 1)");
    abi_allreduce_ok(comm, members, r->nranks, r->rank, 50, "scalable nId 1");
    NCCL_OK(ncclCommDestroy(comm), NULL);
  }
  {
    ncclComm_t comm = NULL;
    ncclUniqueId two[2] = {r->ids[1], r->ids[2]};
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.commName = "abi-scalable";
    NCCL_REQUIRE(ncclCommInitRankScalable(&comm, r->nranks, r->rank, 2, two, &config), NULL);
    REQUIRE(comm != NULL, "ncclCommInitRankScalable(nId 2) left *comm NULL");
    abi_check_comm_shape(comm, r->nranks, r->rank, "ncclCommInitRankScalable(nId 2)");
    abi_allreduce_ok(comm, members, r->nranks, r->rank, 51, "scalable nId 2");
    abi_order_ok(comm, members, r->nranks, r->rank, "scalable nId 2");
    NCCL_OK(ncclCommDestroy(comm), NULL);
  }
}

/* ---- ncclCommSplit ---- */

/* The members of colour `color` ordered by (key, parent rank). */
static int split_members(int n, int color, int (*color_of)(int, int), int (*key_of)(int, int),
                         int* out) {
  int m = 0;
  for (int p = 0; p < n; ++p)
    if (color_of(p, n) == color) out[m++] = p;
  for (int i = 1; i < m; ++i)
    for (int j = i; j > 0; --j) {
      int a = out[j - 1], b = out[j];
      if (key_of(a, n) > key_of(b, n) || (key_of(a, n) == key_of(b, n) && a > b)) {
        out[j - 1] = b;
        out[j] = a;
      }
    }
  return m;
}

static int color_parity(int p, int n) {
  (void)n;
  return p % 2;
}
static int key_reverse(int p, int n) { return n - p; }
static int color_drop1(int p, int n) {
  (void)n;
  return p == 1 ? NCCL_SPLIT_NOCOLOR : 7;
}
static int key_zero(int p, int n) {
  (void)p;
  (void)n;
  return 0;
}

static void split_round(ncclComm_t parent, int rank, int n, int (*color_of)(int, int),
                        int (*key_of)(int, int), ncclConfig_t* config, const char* what,
                        unsigned salt) {
  ncclComm_t child = (ncclComm_t)(uintptr_t)0x1; /* must be overwritten */
  int color = color_of(rank, n);
  if (!NCCL_OK(ncclCommSplit(parent, color, key_of(rank, n), &child, config), parent)) return;
  if (color == NCCL_SPLIT_NOCOLOR) {
    CHECK(child == NULL, "%s: NCCL_SPLIT_NOCOLOR gave newcomm %p, expected NULL", what,
          (void*)child);
    return;
  }
  REQUIRE(child != NULL && child != (ncclComm_t)(uintptr_t)0x1, "%s: no new communicator", what);
  int members[ABI_MAX_RANKS];
  int m = split_members(n, color, color_of, key_of, members);
  int me = -1;
  for (int i = 0; i < m; ++i)
    if (members[i] == rank) me = i;
  abi_check_comm_shape(child, m, me, what);
  abi_order_ok(child, members, m, rank, what);
  abi_allreduce_ok(child, members, m, rank, salt, what);
  NCCL_OK(ncclCommDestroy(child), NULL);
}

void scenario_split(const abi_rank_t* r) {
  ncclComm_t comm = abi_init_comm(r, 0);
  /* Two colours (parity), keys reversing the order; config NULL (inherit). */
  split_round(comm, r->rank, r->nranks, color_parity, key_reverse, NULL,
              "ncclCommSplit(colour rank%2, key n-rank)", 60);
  /* Rank 1 opts out; a config with a name. */
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.commName = "abi-split";
  split_round(comm, r->rank, r->nranks, color_drop1, key_zero, &config,
              "ncclCommSplit(rank 1 NCCL_SPLIT_NOCOLOR)", 61);
  /* The parent still works. */
  int members[ABI_MAX_RANKS];
  iota(members, r->nranks);
  abi_allreduce_ok(comm, members, r->nranks, r->rank, 62, "parent after the splits");
  NCCL_OK(ncclCommDestroy(comm), NULL);
}

/* ---- ncclCommShrink on a healthy communicator ---- */

void scenario_shrink(const abi_rank_t* r) {
  ncclComm_t comm = abi_init_comm(r, 0);
  int n = r->nranks, rank = r->rank;
  int all[ABI_MAX_RANKS];
  iota(all, n);
  abi_allreduce_ok(comm, all, n, rank, 70, "before the shrink");

  /* Refused locally (as NCCL does): an empty list; a rank in the list calling. */
  {
    int excl[1] = {1};
    ncclComm_t child = NULL;
    NCCL_EXPECT(ncclCommShrink(comm, excl, 0, &child, NULL, NCCL_SHRINK_DEFAULT),
                ncclInvalidArgument, comm);
    if (!CHECK(child == NULL, "ncclCommShrink(excludeRanksCount 0) made a communicator"))
      ncclCommDestroy(child);
    child = NULL;
    if (rank == 1) {
      NCCL_EXPECT(ncclCommShrink(comm, excl, 1, &child, NULL, NCCL_SHRINK_DEFAULT),
                  ncclInvalidArgument, comm);
      if (!CHECK(child == NULL, "ncclCommShrink called by an excluded rank made a communicator"))
        ncclCommDestroy(child);
    }
  }
  abi_barrier(2, n);

  /* Exclude rank 1 (the excluded rank does not call ncclCommShrink). */
  if (rank != 1) {
    int excl[1] = {1};
    ncclComm_t child = NULL;
    if (NCCL_OK(ncclCommShrink(comm, excl, 1, &child, NULL, NCCL_SHRINK_DEFAULT), comm)) {
      REQUIRE(child != NULL, "ncclCommShrink succeeded but left *newcomm NULL");
      int members[2] = {0, 2};
      abi_check_comm_shape(child, 2, rank == 0 ? 0 : 1, "ncclCommShrink(exclude 1)");
      abi_order_ok(child, members, 2, rank, "ncclCommShrink(exclude 1)");
      abi_allreduce_ok(child, members, 2, rank, 71, "ncclCommShrink(exclude 1)");
      NCCL_OK(ncclCommDestroy(child), NULL);
    }
  }
  abi_barrier(0, n);
  /* Exclude ranks 0 and 1 (given unsorted): rank 2 alone. */
  if (rank == 2) {
    int excl[2] = {1, 0};
    ncclComm_t child = NULL;
    if (NCCL_OK(ncclCommShrink(comm, excl, 2, &child, NULL, NCCL_SHRINK_DEFAULT), comm)) {
      REQUIRE(child != NULL, "ncclCommShrink succeeded but left *newcomm NULL");
      int members[1] = {2};
      abi_check_comm_shape(child, 1, 0, "ncclCommShrink(exclude 1, 0)");
      abi_allreduce_ok(child, members, 1, rank, 72, "ncclCommShrink(exclude 1, 0)");
      NCCL_OK(ncclCommDestroy(child), NULL);
    }
  }
  abi_barrier(1, n);
  /* The parent is untouched by a default shrink. */
  abi_allreduce_ok(comm, all, n, rank, 73, "parent after ncclCommShrink(NCCL_SHRINK_DEFAULT)");
  NCCL_OK(ncclCommDestroy(comm), NULL);
}

/* ---- a rank dies; the survivors shrink it away ---- */

void scenario_shrink_after_kill(const abi_rank_t* r) {
  const int victim = 1;
  ncclComm_t comm = abi_init_comm(r, 0);
  int n = r->nranks, rank = r->rank;
  int all[ABI_MAX_RANKS];
  iota(all, n);
  abi_allreduce_ok(comm, all, n, rank, 80, "before the kill");
  abi_barrier(0, n);
  if (rank == victim) {
    abi_sleep(0.3); /* the survivors are inside their all-reduce by now */
    abi_note("killing myself (SIGKILL)");
    raise(SIGKILL);
  }

  const size_t cnt = 1031;
  void* s = abi_alloc(cnt * 4);
  void* d = abi_alloc(cnt * 4);
  abi_fill_red(ncclFloat32, ABI_SUM, rank, n, s, cnt, 0, 81);
  double t0 = abi_now();
  ncclResult_t res = ncclAllReduce(s, d, cnt, ncclFloat32, ncclSum, comm, NULL);
  double dt = abi_now() - t0;
  abi_note("all-reduce with a dead peer returned %d (%s) after %.2f s: %s", (int)res,
           ncclGetErrorString(res), dt, ncclGetLastError(comm));
  NCCL_EXPECT2(res, ncclRemoteError, ncclSystemError, comm);
  CHECK(dt < 15.0, "the all-reduce took %.1f s to notice the dead peer", dt);
  abi_free(s, cnt * 4);
  abi_free(d, cnt * 4);

  ncclResult_t state = abi_wait_settled(comm, 5);
  CHECK(state == ncclRemoteError || state == ncclSystemError,
        "ncclCommGetAsyncError after the peer's death: %d (%s), expected ncclRemoteError or "
        "ncclSystemError",
        (int)state, ncclGetErrorString(state));

  int excl[1] = {victim};
  ncclComm_t child = NULL;
  NCCL_REQUIRE(ncclCommShrink(comm, excl, 1, &child, NULL, NCCL_SHRINK_ABORT), comm);
  REQUIRE(child != NULL, "ncclCommShrink(NCCL_SHRINK_ABORT) succeeded but left *newcomm NULL");
  int members[2] = {0, 2};
  abi_check_comm_shape(child, 2, rank == 0 ? 0 : 1, "shrink after the kill");
  abi_order_ok(child, members, 2, rank, "shrink after the kill");
  abi_allreduce_ok(child, members, 2, rank, 82, "shrink after the kill");
  state = ncclInternalError;
  if (NCCL_OK(ncclCommGetAsyncError(child, &state), child))
    CHECK(state == ncclSuccess, "the shrunk communicator's state is %d (%s)", (int)state,
          ncclGetErrorString(state));
  NCCL_OK(ncclCommDestroy(child), NULL);
  NCCL_OK(ncclCommAbort(comm), NULL);
}

/* ---- ncclCommAbort from another thread ---- */

typedef struct {
  ncclComm_t comm;
  double delay;
  ncclResult_t result;
  double at;
} aborter_t;

static void* aborter_main(void* p) {
  aborter_t* a = (aborter_t*)p;
  abi_sleep(a->delay);
  a->at = abi_now();
  a->result = ncclCommAbort(a->comm);
  return NULL;
}

void scenario_abort(const abi_rank_t* r) {
  /* Above the default of the harness: a return by the library's timeout
   * would come too late to pass. */
  setenv("LANES_TIMEOUT", "30", 1);
  ncclComm_t comm = abi_init_comm(r, 0);
  if (r->rank == 0) {
    aborter_t a = {comm, 1.0, ncclInternalError, 0};
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, aborter_main, &a) == 0, "pthread_create");
    const size_t cnt = 1024;
    void* buf = abi_alloc(cnt * 4);
    double t0 = abi_now();
    /* Rank 1 never sends. */
    ncclResult_t res = ncclRecv(buf, cnt, ncclInt32, 1, comm, NULL);
    double dt = abi_now() - t0;
    pthread_join(th, NULL);
    abi_note("ncclRecv returned %d (%s) after %.2f s (abort at %.2f s): %s", (int)res,
             ncclGetErrorString(res), dt, a.at - t0, ncclGetLastError(NULL));
    CHECK(res != ncclSuccess, "ncclRecv from a rank that never sends returned success");
    CHECK(dt >= 0.9, "ncclRecv returned after %.2f s, before the abort (1 s)", dt);
    CHECK(dt < 6.0,
          "ncclRecv returned %.2f s after it started: the abort (at 1 s) did not "
          "unblock it",
          dt);
    CHECK(a.result == ncclSuccess, "ncclCommAbort from the other thread returned %d (%s)",
          (int)a.result, ncclGetErrorString(a.result));
    abi_free(buf, cnt * 4);
    abi_arrive(0);
  } else {
    /* Wait until rank 0 is done, then drop the communicator. */
    CHECK(abi_wait_count(0, 1, 40), "rank 0 never finished");
    NCCL_OK(ncclCommAbort(comm), NULL);
  }
}

#ifdef NCCL_REVOKE_DEFAULT /* ncclCommRevoke came with NCCL 2.28.9's header */
/* ---- ncclCommRevoke ---- */

void scenario_revoke(const abi_rank_t* r) {
  ncclComm_t comm = abi_init_comm(r, 0);
  int n = r->nranks, rank = r->rank;
  int all[ABI_MAX_RANKS];
  iota(all, n);
  abi_allreduce_ok(comm, all, n, rank, 90, "before the revoke");
  /* Flags other than NCCL_REVOKE_DEFAULT are refused, and revoke nothing. */
  NCCL_EXPECT(ncclCommRevoke(comm, 1), ncclInvalidArgument, comm);
  abi_allreduce_ok(comm, all, n, rank, 91, "after a refused ncclCommRevoke(flags 1)");
  abi_barrier(0, n); /* nobody is still inside the all-reduce */

  /* Rank 0 revokes first, alone: a local act that fails no peer. */
  if (rank == 0) {
    if (NCCL_EXPECT2(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT), ncclSuccess, ncclInProgress,
                     comm)) {
      ncclResult_t state = abi_wait_settled(comm, 10);
      CHECK(state == ncclSuccess,
            "after ncclCommRevoke the state settled at %d (%s), expected ncclSuccess "
            "(quiescent): %s",
            (int)state, ncclGetErrorString(state), ncclGetLastError(comm));
    }
    abi_arrive(1);
  } else {
    CHECK(abi_wait_count(1, 1, 30), "rank 0 never revoked");
    abi_sleep(0.3); /* time for anything rank 0's revoke sends to arrive */
    ncclResult_t state = ncclInternalError;
    if (NCCL_OK(ncclCommGetAsyncError(comm, &state), comm))
      CHECK(state == ncclSuccess,
            "rank 0's ncclCommRevoke failed this rank's communicator: state %d (%s): %s",
            (int)state, ncclGetErrorString(state), ncclGetLastError(comm));
    if (NCCL_EXPECT2(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT), ncclSuccess, ncclInProgress,
                     comm)) {
      state = abi_wait_settled(comm, 10);
      CHECK(state == ncclSuccess,
            "after ncclCommRevoke the state settled at %d (%s), expected ncclSuccess "
            "(quiescent): %s",
            (int)state, ncclGetErrorString(state), ncclGetLastError(comm));
    }
  }
  abi_barrier(2, n);

  /* A revoked communicator refuses work with ncclInvalidUsage. */
  int32_t x = 1, y = 0;
  NCCL_EXPECT(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, NULL), ncclInvalidUsage, comm);
  NCCL_EXPECT(ncclSend(&x, 1, ncclInt32, (rank + 1) % n, comm, NULL), ncclInvalidUsage, comm);
  NCCL_EXPECT(ncclBroadcast(&x, &y, 1, ncclInt32, 0, comm, NULL), ncclInvalidUsage, comm);
  CHECK(y == 0, "a refused call on a revoked communicator wrote recvbuff");
  /* nccl.h: finalize after revoke is invalid. */
  ncclResult_t res = ncclCommFinalize(comm);
  CHECK(res == ncclInvalidArgument || res == ncclInvalidUsage,
        "ncclCommFinalize after ncclCommRevoke returned %d (%s), expected ncclInvalidArgument "
        "or ncclInvalidUsage",
        (int)res, ncclGetErrorString(res));
  NCCL_OK(ncclCommDestroy(comm), NULL);

  /* Every rank revokes at once (the usual way to stop a job), then each sees
   * ncclInvalidUsage, not the others' revokes as failures. */
  comm = abi_init_comm(r, 1);
  NCCL_EXPECT(ncclCommRevoke(comm, 1), ncclInvalidArgument, comm);
  abi_allreduce_ok(comm, all, n, rank, 92, "second communicator");
  abi_barrier(3, n);
  if (NCCL_EXPECT2(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT), ncclSuccess, ncclInProgress, comm)) {
    ncclResult_t state = abi_wait_settled(comm, 10);
    CHECK(state == ncclSuccess,
          "after a simultaneous ncclCommRevoke the state settled at %d (%s): %s", (int)state,
          ncclGetErrorString(state), ncclGetLastError(comm));
  }
  NCCL_EXPECT(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, NULL), ncclInvalidUsage, comm);
  abi_barrier(4, n);
  NCCL_EXPECT(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, NULL), ncclInvalidUsage, comm);
  NCCL_OK(ncclCommDestroy(comm), NULL);
}

#endif

/* ---- ncclGroupSimulateEnd ---- */

void scenario_simulate(const abi_rank_t* r) {
  ncclComm_t comm = abi_init_comm(r, 0);
  int n = r->nranks, rank = r->rank;
  const size_t cnt = 1 << 16;
  float* s = (float*)abi_alloc(cnt * 4);
  float* d = (float*)abi_alloc(cnt * 4);
  abi_fill_red(ncclFloat32, ABI_SUM, rank, n, s, cnt, 0, 100);

  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  int ok = NCCL_OK(ncclGroupStart(), NULL);
  ok &= NCCL_OK(ncclAllReduce(s, d, cnt, ncclFloat32, ncclSum, comm, NULL), comm);
  ok &= NCCL_OK(ncclGroupSimulateEnd(&info), comm);
  if (ok) {
    abi_note("ncclGroupSimulateEnd: estimatedTime %g", (double)info.estimatedTime);
    CHECK(info.estimatedTime > 0, "ncclGroupSimulateEnd: estimatedTime %g, expected > 0",
          (double)info.estimatedTime);
    const char* err = abi_check_untouched(d, cnt * 4);
    CHECK(err == NULL, "ncclGroupSimulateEnd ran the all-reduce: recvbuff %s", err);
  }
  /* Nothing was left behind: a real all-reduce (outside any group) runs. */
  if (NCCL_OK(ncclAllReduce(s, d, cnt, ncclFloat32, ncclSum, comm, NULL), comm)) {
    const char* err = abi_check_red(ncclFloat32, ABI_SUM, n, d, cnt, 0, 100);
    CHECK(err == NULL, "all-reduce after ncclGroupSimulateEnd: %s", err);
  }
  memset(d, 0xA5, cnt * 4);

  /* A simInfo not from NCCL_SIM_INFO_INITIALIZER is refused, and the group is
   * over all the same (NCCL leaves the group before it looks at simInfo). */
  ncclSimInfo_t bad = NCCL_SIM_INFO_INITIALIZER;
  bad.magic = 0;
  NCCL_OK(ncclGroupStart(), NULL);
  NCCL_EXPECT(ncclGroupSimulateEnd(&bad), ncclInvalidArgument, NULL);

  if (NCCL_OK(ncclAllReduce(s, d, cnt, ncclFloat32, ncclSum, comm, NULL), comm)) {
    const char* err = abi_check_red(ncclFloat32, ABI_SUM, n, d, cnt, 0, 100);
    CHECK(err == NULL,
          "all-reduce after a refused ncclGroupSimulateEnd (still inside the group?): %s", err);
  }
  abi_free(s, cnt * 4);
  abi_free(d, cnt * 4);
  NCCL_OK(ncclCommDestroy(comm), NULL);
}

/* ---- registration ---- */

static int not_a_handle[4];

void scenario_register(const abi_rank_t* r) {
  ncclComm_t comm = abi_init_comm(r, 0);
  int n = r->nranks, rank = r->rank;
  const size_t cnt = 1 << 14, bytes = cnt * 4;
  float* s = (float*)aligned_alloc(NCCL_WIN_REQUIRED_ALIGNMENT, bytes);
  float* d = (float*)aligned_alloc(NCCL_WIN_REQUIRED_ALIGNMENT, bytes);
  REQUIRE(s && d, "aligned_alloc");

  /* ncclCommRegister */
  void* hs = NULL;
  void* hd = NULL;
  NCCL_OK(ncclCommRegister(comm, s, bytes, &hs), comm);
  NCCL_OK(ncclCommRegister(comm, d, bytes, &hd), comm);
  CHECK(hs != NULL && hd != NULL, "ncclCommRegister gave a NULL handle (%p, %p)", hs, hd);
  abi_fill_red(ncclFloat32, ABI_SUM, rank, n, s, cnt, 0, 110);
  memset(d, 0, bytes);
  if (NCCL_OK(ncclAllReduce(s, d, cnt, ncclFloat32, ncclSum, comm, NULL), comm)) {
    const char* err = abi_check_red(ncclFloat32, ABI_SUM, n, d, cnt, 0, 110);
    CHECK(err == NULL, "all-reduce on registered buffers: %s", err);
  }
  if (hs) NCCL_OK(ncclCommDeregister(comm, hs), comm);
  if (hd) NCCL_OK(ncclCommDeregister(comm, hd), comm);
  NCCL_EXPECT(ncclCommDeregister(comm, not_a_handle), ncclInvalidArgument, comm);

  /* ncclCommWindowRegister, default and symmetric */
  static const int flags[2] = {NCCL_WIN_DEFAULT, NCCL_WIN_COLL_SYMMETRIC};
  for (int f = 0; f < 2; ++f) {
    ncclWindow_t ws = NULL, wd = NULL;
    NCCL_OK(ncclCommWindowRegister(comm, s, bytes, &ws, flags[f]), comm);
    NCCL_OK(ncclCommWindowRegister(comm, d, bytes, &wd, flags[f]), comm);
    CHECK(ws != NULL && wd != NULL, "ncclCommWindowRegister(flags %d) gave a NULL window",
          flags[f]);
    abi_fill_red(ncclFloat32, ABI_MAX, rank, n, s, cnt, 0, 111 + (unsigned)f);
    memset(d, 0, bytes);
    if (NCCL_OK(ncclAllReduce(s, d, cnt, ncclFloat32, ncclMax, comm, NULL), comm)) {
      const char* err = abi_check_red(ncclFloat32, ABI_MAX, n, d, cnt, 0, 111 + (unsigned)f);
      CHECK(err == NULL, "all-reduce on window-registered buffers (flags %d): %s", flags[f], err);
    }
    if (ws) NCCL_OK(ncclCommWindowDeregister(comm, ws), comm);
    if (wd) NCCL_OK(ncclCommWindowDeregister(comm, wd), comm);
  }
  NCCL_EXPECT(ncclCommWindowDeregister(comm, (ncclWindow_t)(void*)not_a_handle),
              ncclInvalidArgument, comm);
  free(s);
  free(d);
  NCCL_OK(ncclCommDestroy(comm), NULL);
}

/* ---- queries, one rank ---- */

void scenario_queries(const abi_rank_t* r) {
  int version = 0;
  if (NCCL_OK(ncclGetVersion(&version), NULL))
    CHECK(version == NCCL_VERSION_CODE, "ncclGetVersion gave %d, expected NCCL_VERSION_CODE %d",
          version, NCCL_VERSION_CODE);
  version = 0;
  if (NCCL_OK(pncclGetVersion(&version), NULL))
    CHECK(version == NCCL_VERSION_CODE, "pncclGetVersion gave %d", version);

  /* Error strings: NCCL's wording (tools match on it), one per code. */
  static const char* prefixes[ncclNumResults] = {
      "no error",
      "unhandled cuda error",
      "unhandled system error",
      "internal error",
      "invalid argument",
      "invalid usage",
      "remote process exited or there was a network error",
      "NCCL operation in progress"};
  for (int i = 0; i < ncclNumResults; ++i) {
    const char* s = ncclGetErrorString((ncclResult_t)i);
    if (!CHECK(s != NULL && s[0] != '\0', "ncclGetErrorString(%d) is empty", i)) continue;
    CHECK(strncmp(s, prefixes[i], strlen(prefixes[i])) == 0,
          "ncclGetErrorString(%d) is '%s', NCCL's starts with '%s'", i, s, prefixes[i]);
    for (int j = 0; j < i; ++j)
      CHECK(strcmp(s, ncclGetErrorString((ncclResult_t)j)) != 0,
            "ncclGetErrorString gives '%s' for both %d and %d", s, j, i);
    CHECK(strcmp(s, pncclGetErrorString((ncclResult_t)i)) == 0, "pncclGetErrorString(%d) differs",
          i);
  }
  const char* unknown = ncclGetErrorString((ncclResult_t)99);
  CHECK(unknown != NULL && unknown[0] != '\0', "ncclGetErrorString(99) is empty");
  CHECK(ncclGetLastError(NULL) != NULL, "ncclGetLastError(NULL) returned NULL");

  /* Abort and destroy accept NULL, as NCCL's do. */
  NCCL_OK(ncclCommAbort(NULL), NULL);
  NCCL_OK(ncclCommDestroy(NULL), NULL);

  ncclComm_t comm = abi_init_comm(r, 0);
  int count = 0;
  if (NCCL_OK(pncclCommCount(comm, &count), comm))
    CHECK(count == 1, "pncclCommCount gave %d", count);

  /* ncclMemAlloc: device memory, so an error without a GPU. */
  void* p = NULL;
  ncclResult_t res = ncclMemAlloc(&p, 1 << 20);
  if (res == ncclSuccess) {
    abi_note("ncclMemAlloc succeeded: a GPU is present");
    CHECK(p != NULL, "ncclMemAlloc succeeded with a NULL pointer");
    NCCL_OK(ncclMemFree(p), NULL);
  } else {
    const char* le = ncclGetLastError(NULL);
    abi_note("ncclMemAlloc: %d (%s): %s", (int)res, ncclGetErrorString(res), le);
    CHECK(!abi_have_gpu(), "ncclMemAlloc failed on a machine with a GPU: %s", le);
    CHECK(le != NULL && le[0] != '\0', "ncclMemAlloc failed without a ncclGetLastError sentence");
  }

  /* Device-initiated communication is not offered. */
  {
    char reqs[256], devcomm[1024];
    memset(reqs, 0, sizeof reqs);
    memset(devcomm, 0, sizeof devcomm);
    if (NCCL_EXPECT(ncclDevCommCreate(comm, reqs, devcomm), ncclInvalidUsage, comm))
      CHECK(strstr(ncclGetLastError(comm), "device-initiated") != NULL,
            "ncclDevCommCreate's error does not mention device-initiated communication: '%s'",
            ncclGetLastError(comm));
    if (NCCL_EXPECT(ncclDevCommDestroy(comm, devcomm), ncclInvalidUsage, comm))
      CHECK(strstr(ncclGetLastError(comm), "device-initiated") != NULL,
            "ncclDevCommDestroy's error does not mention device-initiated communication: '%s'",
            ncclGetLastError(comm));
  }

  /* One rank: a collective is a copy. */
  {
    int members[1] = {0};
    abi_allreduce_ok(comm, members, 1, 0, 120, "one rank");
  }
  ncclResult_t state = ncclInternalError;
  if (NCCL_OK(ncclCommGetAsyncError(comm, &state), comm))
    CHECK(state == ncclSuccess, "ncclCommGetAsyncError: %d (%s)", (int)state,
          ncclGetErrorString(state));
  if (NCCL_OK(ncclCommFinalize(comm), comm)) {
    state = abi_wait_settled(comm, 10);
    CHECK(state == ncclSuccess, "after ncclCommFinalize: state %d (%s)", (int)state,
          ncclGetErrorString(state));
  }
  NCCL_OK(ncclCommDestroy(comm), NULL);

  /* Configs on one-rank communicators (ids made here): NULL; every field set;
   * and the shorter ncclConfig_t of an older nccl.h (2.14: up to netName),
   * whose later fields hold values that must not be read. */
  int one[1] = {0};
  {
    ncclUniqueId id;
    ncclComm_t c = NULL;
    NCCL_REQUIRE(ncclGetUniqueId(&id), NULL);
    if (NCCL_OK(ncclCommInitRankConfig(&c, 1, id, 0, NULL), NULL)) {
      abi_allreduce_ok(c, one, 1, 0, 121, "config NULL");
      NCCL_OK(ncclCommDestroy(c), NULL);
    }
  }
  {
    ncclUniqueId id;
    ncclComm_t c = NULL;
    NCCL_REQUIRE(ncclGetUniqueId(&id), NULL);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 1;
    cfg.cgaClusterSize = 4;
    cfg.minCTAs = 1;
    cfg.maxCTAs = 16;
    cfg.netName = "Socket";
    cfg.splitShare = 1;
    cfg.trafficClass = 0;
    cfg.commName = "abi-every-field";
    cfg.collnetEnable = 0;
    cfg.CTAPolicy = NCCL_CTA_POLICY_EFFICIENCY;
    cfg.shrinkShare = 0;
    cfg.nvlsCTAs = 16;
    cfg.nChannelsPerNetPeer = 1;
    cfg.nvlinkCentricSched = 0;
    if (NCCL_OK(ncclCommInitRankConfig(&c, 1, id, 0, &cfg), NULL)) {
      abi_allreduce_ok(c, one, 1, 0, 122, "config with every field set");
      NCCL_OK(ncclCommDestroy(c), NULL);
    }
  }
  {
    ncclUniqueId id;
    ncclComm_t c = NULL;
    NCCL_REQUIRE(ncclGetUniqueId(&id), NULL);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.size = offsetof(ncclConfig_t, splitShare);
    cfg.version = NCCL_VERSION(2, 14, 3);
    cfg.blocking = 1;
    cfg.splitShare = 0x7f7f7f7f;
    cfg.trafficClass = -77;
    cfg.commName = "read-past-the-callers-size";
    cfg.collnetEnable = 0x7f7f7f7f;
    cfg.CTAPolicy = 0x7f7f7f7f;
    cfg.shrinkShare = -77;
    cfg.nvlsCTAs = -77;
    cfg.nChannelsPerNetPeer = -77;
    cfg.nvlinkCentricSched = -77;
    if (NCCL_OK(ncclCommInitRankConfig(&c, 1, id, 0, &cfg), NULL)) {
      abi_allreduce_ok(c, one, 1, 0, 123, "NCCL 2.14-sized config");
      NCCL_OK(ncclCommDestroy(c), NULL);
    }
  }
}

/* ---- error paths ---- */

typedef struct {
  ncclComm_t comm;    /* a live communicator of n ranks */
  ncclComm_t dead;    /* a destroyed one */
  ncclUniqueId local; /* an id made by this rank (for init argument errors) */
  int rank, n;
  void* a; /* 4 KiB */
  void* b; /* 4 KiB * n */
} err_ctx_t;

typedef struct {
  const char* what;
  ncclResult_t want;
  int comm_for_last_error; /* 1: ncclGetLastError(ctx->comm), 0: NULL */
} err_case_t;

/* The call of case k. */
static ncclResult_t err_call(int k, err_ctx_t* c) {
  ncclComm_t comm = c->comm;
  void* a = c->a;
  void* b = c->b;
  int n = c->n, peer = (c->rank + 1) % c->n;
  ncclComm_t out = NULL;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  int count = 0;
  switch (k) {
    case 0:
      return ncclAllReduce(a, b, 16, ncclFloat32, ncclSum, NULL, NULL);
    case 1:
      return ncclBroadcast(a, b, 16, ncclFloat32, 0, NULL, NULL);
    case 2:
      return ncclSend(a, 16, ncclFloat32, 0, NULL, NULL);
    case 3:
      return ncclCommCount(NULL, &count);
    case 4:
      return ncclAllReduce(a, b, 16, ncclFloat32, ncclSum, c->dead, NULL);
    case 5:
      return ncclCommUserRank(c->dead, &count);
    case 6:
      return ncclAllReduce(a, b, 16, ncclNumTypes, ncclSum, comm, NULL);
    case 7:
      return ncclAllGather(a, b, 16, (ncclDataType_t)-1, comm, NULL);
    case 8:
      return ncclAllReduce(a, b, 16, ncclFloat32, (ncclRedOp_t)(ncclNumOps + 99), comm, NULL);
    case 9:
      return ncclReduce(a, b, 16, ncclFloat32, (ncclRedOp_t)(ncclNumOps + 99), 0, comm, NULL);
    case 10:
      return ncclBroadcast(a, b, 16, ncclFloat32, n, comm, NULL);
    case 11:
      return ncclBroadcast(a, b, 16, ncclFloat32, -1, comm, NULL);
    case 12:
      return ncclReduce(a, b, 16, ncclFloat32, ncclSum, n, comm, NULL);
    case 13:
      return ncclGather(a, b, 16, ncclFloat32, n, comm, NULL);
    case 14:
      return ncclScatter(b, a, 16, ncclFloat32, -1, comm, NULL);
    case 15:
      return ncclBcast(a, 16, ncclFloat32, n + 5, comm, NULL);
    case 16:
      return ncclSend(a, 16, ncclFloat32, n, comm, NULL);
    case 17:
      return ncclRecv(a, 16, ncclFloat32, -1, comm, NULL);
    case 18:
      return ncclAllReduce(NULL, b, 16, ncclFloat32, ncclSum, comm, NULL);
    case 19:
      return ncclAllReduce(a, NULL, 16, ncclFloat32, ncclSum, comm, NULL);
    case 20:
      return ncclAllGather(a, NULL, 16, ncclFloat32, comm, NULL);
    case 21:
      return ncclBroadcast(a, NULL, 16, ncclFloat32, 0, comm, NULL);
    case 22:
      return ncclSend(NULL, 16, ncclFloat32, peer, comm, NULL);
    case 23:
      return ncclRecv(NULL, 16, ncclFloat32, peer, comm, NULL);
    case 24:
      return ncclReduceScatter(NULL, a, 16, ncclFloat32, ncclSum, comm, NULL);
    case 25:
      return ncclAlltoAll(b, NULL, 16, ncclFloat32, comm, NULL);
    case 26:
      return ncclRedOpDestroy(ncclSum, comm);
    case 27:
      return ncclCommGetAsyncError(comm, NULL);
    case 28:
      cfg.magic = 0;
      return ncclCommInitRankConfig(&out, 1, c->local, 0, &cfg);
    case 29:
      return ncclCommInitRank(&out, 2, c->local, 2);
    case 30:
      return ncclCommInitRank(&out, 0, c->local, 0);
    case 31:
      return ncclCommInitAll(&out, 0, NULL);
    case 32:
      return ncclCommInitAll(NULL, 1, NULL);
    case 33:
      return ncclCommSplit(NULL, 0, 0, &out, NULL);
    case 34:
      return ncclGetUniqueId(NULL);
    case 35:
      return ncclGroupEnd(); /* no ncclGroupStart */
    case 36:
      return ncclGetVersion(NULL);
    default:
      return ncclInternalError;
  }
}

static const err_case_t kErrCases[] = {
    {"ncclAllReduce(comm NULL)", ncclInvalidArgument, 0},
    {"ncclBroadcast(comm NULL)", ncclInvalidArgument, 0},
    {"ncclSend(comm NULL)", ncclInvalidArgument, 0},
    {"ncclCommCount(NULL)", ncclInvalidArgument, 0},
    {"ncclAllReduce(destroyed comm)", ncclInvalidArgument, 0},
    {"ncclCommUserRank(destroyed comm)", ncclInvalidArgument, 0},
    {"ncclAllReduce(datatype ncclNumTypes)", ncclInvalidArgument, 1},
    {"ncclAllGather(datatype -1)", ncclInvalidArgument, 1},
    {"ncclAllReduce(op ncclNumOps + 99)", ncclInvalidArgument, 1},
    {"ncclReduce(op ncclNumOps + 99)", ncclInvalidArgument, 1},
    {"ncclBroadcast(root nranks)", ncclInvalidArgument, 1},
    {"ncclBroadcast(root -1)", ncclInvalidArgument, 1},
    {"ncclReduce(root nranks)", ncclInvalidArgument, 1},
    {"ncclGather(root nranks)", ncclInvalidArgument, 1},
    {"ncclScatter(root -1)", ncclInvalidArgument, 1},
    {"ncclBcast(root nranks + 5)", ncclInvalidArgument, 1},
    {"ncclSend(peer nranks)", ncclInvalidArgument, 1},
    {"ncclRecv(peer -1)", ncclInvalidArgument, 1},
    {"ncclAllReduce(sendbuff NULL, count 16)", ncclInvalidArgument, 1},
    {"ncclAllReduce(recvbuff NULL, count 16)", ncclInvalidArgument, 1},
    {"ncclAllGather(recvbuff NULL, count 16)", ncclInvalidArgument, 1},
    {"ncclBroadcast(recvbuff NULL, count 16)", ncclInvalidArgument, 1},
    {"ncclSend(sendbuff NULL, count 16)", ncclInvalidArgument, 1},
    {"ncclRecv(recvbuff NULL, count 16)", ncclInvalidArgument, 1},
    {"ncclReduceScatter(sendbuff NULL, count 16)", ncclInvalidArgument, 1},
    {"ncclAlltoAll(recvbuff NULL, count 16)", ncclInvalidArgument, 1},
    {"ncclRedOpDestroy(ncclSum)", ncclInvalidArgument, 1},
    {"ncclCommGetAsyncError(asyncError NULL)", ncclInvalidArgument, 1},
    {"ncclCommInitRankConfig(config.magic 0)", ncclInvalidArgument, 0},
    {"ncclCommInitRank(rank 2 of 2)", ncclInvalidArgument, 0},
    {"ncclCommInitRank(nranks 0)", ncclInvalidArgument, 0},
    {"ncclCommInitAll(ndev 0)", ncclInvalidArgument, 0},
    {"ncclCommInitAll(comm NULL)", ncclInvalidArgument, 0},
    {"ncclCommSplit(comm NULL)", ncclInvalidArgument, 0},
    {"ncclGetUniqueId(NULL)", ncclInvalidArgument, 0},
    {"ncclGroupEnd() without ncclGroupStart()", ncclInvalidUsage, 0},
    {"ncclGetVersion(NULL)", ncclInvalidArgument, 0},
};

typedef struct {
  err_ctx_t* ctx;
  int k;
} err_job_t;

/* One case on a fresh thread: the last error there can only be this call's. */
static void err_job(void* p) {
  err_job_t* job = (err_job_t*)p;
  const err_case_t* ec = &kErrCases[job->k];
  ncclComm_t le_comm = ec->comm_for_last_error ? job->ctx->comm : NULL;
  /* Leave a distinct error first (a datatype / nranks no other call uses), so
   * an unchanged ncclGetLastError shows the case recorded none. */
  if (ec->comm_for_last_error) {
    (void)ncclAllReduce(job->ctx->a, job->ctx->b, 1, (ncclDataType_t)(1000 + job->k), ncclSum,
                        job->ctx->comm, NULL);
  } else {
    ncclComm_t unused = NULL;
    (void)ncclCommInitRank(&unused, -1000 - job->k, job->ctx->local, 0);
  }
  char before[512];
  snprintf(before, sizeof before, "%s", ncclGetLastError(le_comm) ? ncclGetLastError(le_comm) : "");
  ncclResult_t res = err_call(job->k, job->ctx);
  if (abi_expect(res, ec->want, ec->what, le_comm, __FILE__, __LINE__)) {
    const char* after = ncclGetLastError(le_comm);
    CHECK(strcmp(before, after) != 0,
          "%s: ncclGetLastError was '%s' before the call and did not change", ec->what, before);
  }
}

void scenario_errors(const abi_rank_t* r) {
  err_ctx_t c;
  memset(&c, 0, sizeof c);
  c.rank = r->rank;
  c.n = r->nranks;
  c.comm = abi_init_comm(r, 0);
  c.a = abi_alloc(4096);
  c.b = abi_alloc(4096 * (size_t)c.n);
  /* A destroyed communicator (one rank, on an id made here). */
  ncclUniqueId id1;
  NCCL_REQUIRE(ncclGetUniqueId(&id1), NULL);
  NCCL_REQUIRE(ncclCommInitRank(&c.dead, 1, id1, 0), NULL);
  NCCL_REQUIRE(ncclCommDestroy(c.dead), NULL);
  NCCL_REQUIRE(ncclGetUniqueId(&c.local), NULL);

  size_t ncases = sizeof kErrCases / sizeof kErrCases[0];
  for (size_t k = 0; k < ncases; ++k) {
    err_job_t job = {&c, (int)k};
    abi_in_thread(err_job, &job);
  }
  /* ncclCommSplit refuses a config with a bad magic too (every rank calls it,
   * so no split is left half-done). */
  {
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.magic = 0x12345678;
    cfg.blocking = 0;
    ncclComm_t out = NULL;
    NCCL_EXPECT(ncclCommSplit(c.comm, 0, c.rank, &out, &cfg), ncclInvalidArgument, c.comm);
    if (!CHECK(out == NULL, "a refused ncclCommSplit made a communicator")) ncclCommDestroy(out);
  }
  CHECK(abi_check_untouched(c.b, 4096 * (size_t)c.n) == NULL, "a refused call wrote recvbuff: %s",
        abi_check_untouched(c.b, 4096 * (size_t)c.n));

  /* The communicator survived all that. */
  int all[ABI_MAX_RANKS];
  iota(all, c.n);
  abi_allreduce_ok(c.comm, all, c.n, c.rank, 130, "after the error paths");
  ncclResult_t state = ncclInternalError;
  if (NCCL_OK(ncclCommGetAsyncError(c.comm, &state), c.comm))
    CHECK(state == ncclSuccess, "argument errors failed the communicator: state %d (%s)",
          (int)state, ncclGetErrorString(state));
  abi_free(c.a, 4096);
  abi_free(c.b, 4096 * (size_t)c.n);
  NCCL_OK(ncclCommDestroy(c.comm), NULL);
}

/* ---- NCCL_COMM_ID ---- */

/* The first port of the kernel's ephemeral range, which outgoing connections
 * and port-0 listeners draw from (32768 where it cannot be read). */
static int ephemeral_low(void) {
  int low = 32768, high = 0;
  FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (f != NULL) {
    if (fscanf(f, "%d %d", &low, &high) != 2) low = 32768;
    fclose(f);
  }
  return low;
}

/* A port no other process on this host listens on or uses for a connection:
 * below the ephemeral range, and found free by binding it here. */
static int free_pinned_port(void) {
  const int first = 10000, last = ephemeral_low() - 1;
  if (last <= first) return -1;
  for (int k = 0; k <= last - first; ++k) {
    int port = first + (int)((getpid() + k) % (last - first + 1));
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int bound = bind(fd, (struct sockaddr*)&a, sizeof a) == 0;
    close(fd);
    if (bound) return port;
  }
  return -1;
}

void prepare_comm_id(void) {
  int port = free_pinned_port();
  char text[16];
  snprintf(text, sizeof text, "%d", port);
  setenv("ABI_COMM_ID_PORT", text, 1);
  /* Below the watchdog: should rank 0 fail to start the root, the others
   * fail their rendezvous in time and say so instead of being killed. */
  setenv("LANES_BOOTSTRAP_TIMEOUT", "20", 1);
}

/* Every rank derives the id from NCCL_COMM_ID on its own, as NCCL allows, and
 * rank 0 starts the root when it joins. The parent found the port free before
 * starting the ranks (prepare_comm_id), so they agree on it without talking. */
void scenario_comm_id(const abi_rank_t* r) {
  const char* port = getenv("ABI_COMM_ID_PORT");
  REQUIRE(port != NULL && atoi(port) > 0,
          "no free port below the ephemeral range on 127.0.0.1 for NCCL_COMM_ID");
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%s", port);
  setenv("NCCL_COMM_ID", addr, 1);
  ncclUniqueId id;
  NCCL_REQUIRE(ncclGetUniqueId(&id), NULL);
  ncclComm_t comm = NULL;
  NCCL_REQUIRE(ncclCommInitRank(&comm, r->nranks, id, r->rank), NULL);
  abi_check_comm_shape(comm, r->nranks, r->rank, "NCCL_COMM_ID");
  char* all = malloc(sizeof id.internal * (size_t)r->nranks);
  REQUIRE(all != NULL, "out of memory");
  if (NCCL_OK(ncclAllGather(id.internal, all, sizeof id.internal, ncclChar, comm, NULL), comm))
    for (int k = 0; k < r->nranks; ++k)
      CHECK(memcmp(all + k * sizeof id.internal, id.internal, sizeof id.internal) == 0,
            "rank %d derived another id from NCCL_COMM_ID=%s than rank %d", k, addr, r->rank);
  free(all);
  int members[ABI_MAX_RANKS];
  for (int k = 0; k < r->nranks; ++k) members[k] = k;
  abi_allreduce_ok(comm, members, r->nranks, r->rank, 17, "all-reduce under NCCL_COMM_ID");
  NCCL_OK(ncclCommDestroy(comm), NULL);
}
