/* Harness of the NCCL ABI tests (tests/compat): forked ranks with a watchdog,
 * failure reporting in the shape "FAIL rank R: what (error string, last
 * error)", and the shared counters ranks use to agree on a point without the
 * library.
 *
 * The parent forks every rank first, then makes the unique ids (each one
 * starts a bootstrap root thread in the parent, which outlives every rank) and
 * hands them to the ranks over one pipe per rank. */
#ifndef LANES_TESTS_COMPAT_ABI_HARNESS_H_
#define LANES_TESTS_COMPAT_ABI_HARNESS_H_

#include <nccl.h>
#include <stddef.h>

#define ABI_MAX_RANKS 8
#define ABI_MAX_IDS 4
#define ABI_MAX_COUNTERS 16

/* What a rank body gets. */
typedef struct {
  int rank;   /* process index, also the rank in the test's communicators */
  int nranks; /* processes in this run */
  int nids;
  ncclUniqueId ids[ABI_MAX_IDS];
} abi_rank_t;

typedef void (*abi_body_fn)(const abi_rank_t* r);

typedef struct {
  int nranks;
  int nids;               /* unique ids the parent makes for the ranks (0..ABI_MAX_IDS) */
  int watchdog_seconds;   /* per rank (alarm); the parent kills what is left a bit later */
  unsigned expect_killed; /* bit r: rank r is expected to die of SIGKILL */
} abi_run_opts_t;

/* Runs `body` on opts->nranks forked ranks; 0 when every rank passed. */
int abi_run(const char* scenario, const abi_run_opts_t* opts, abi_body_fn body);

/* ---- checks (inside a rank; safe from several threads of one rank) ---- */

/* Records a failure: prints "FAIL rank R: <message> [file:line]". */
void abi_fail(const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
void abi_pass(void);
/* Ends the rank now (failed): for checks later steps cannot survive. */
_Noreturn void abi_bail(void);
/* Prints an informational line prefixed with the rank. */
void abi_note(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

/* Checks that `got` == `want`; on a mismatch the message carries both codes,
 * ncclGetErrorString and ncclGetLastError(comm). When `got` is an error, also
 * checks that ncclGetLastError(comm) and ncclGetLastError(NULL) are not empty.
 * Returns 1 when it matched. */
int abi_expect(ncclResult_t got, ncclResult_t want, const char* expr, ncclComm_t comm,
               const char* file, int line);
/* Same, accepting either of two codes. */
int abi_expect2(ncclResult_t got, ncclResult_t want1, ncclResult_t want2, const char* expr,
                ncclComm_t comm, const char* file, int line);

#define CHECK(cond, ...) ((cond) ? (abi_pass(), 1) : (abi_fail(__FILE__, __LINE__, __VA_ARGS__), 0))
#define REQUIRE(cond, ...)                     \
  do {                                         \
    if (!CHECK(cond, __VA_ARGS__)) abi_bail(); \
  } while (0)
#define NCCL_OK(expr, comm) abi_expect((expr), ncclSuccess, #expr, (comm), __FILE__, __LINE__)
#define NCCL_EXPECT(expr, want, comm) abi_expect((expr), (want), #expr, (comm), __FILE__, __LINE__)
#define NCCL_EXPECT2(expr, want1, want2, comm) \
  abi_expect2((expr), (want1), (want2), #expr, (comm), __FILE__, __LINE__)
#define NCCL_REQUIRE(expr, comm)          \
  do {                                    \
    if (!NCCL_OK(expr, comm)) abi_bail(); \
  } while (0)

/* Failures recorded so far by this rank. */
int abi_failures(void);

/* ---- coordination between forked ranks, without the library ---- */

/* Counter `idx` (shared by every rank of the run): arrive adds one. */
void abi_arrive(int idx);
/* Polls until counter `idx` reaches `count`; 0 after `seconds`. */
int abi_wait_count(int idx, int count, double seconds);
/* abi_arrive then abi_wait_count(idx, nranks); records a failure on expiry. */
void abi_barrier(int idx, int nranks);

/* ---- misc ---- */

double abi_now(void); /* monotonic seconds */
void abi_sleep(double seconds);
/* Runs fn(arg) on a new thread and joins it (fresh thread-local last error). */
void abi_in_thread(void (*fn)(void*), void* arg);

#endif /* LANES_TESTS_COMPAT_ABI_HARNESS_H_ */
