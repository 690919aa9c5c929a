#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "abi_harness.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int g_rank = -1; /* -1: the parent */
static atomic_int g_failures;
static atomic_int g_passes;
static atomic_int* g_counters; /* ABI_MAX_COUNTERS, MAP_SHARED across the forks */
static char g_alarm_msg[160];

double abi_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void abi_sleep(double seconds) {
  if (seconds <= 0) return;
  struct timespec ts;
  ts.tv_sec = (time_t)seconds;
  ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static const char* who(char* buf, size_t size) {
  if (g_rank < 0)
    snprintf(buf, size, "parent");
  else
    snprintf(buf, size, "rank %d", g_rank);
  return buf;
}

void abi_fail(const char* file, int line, const char* fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char* base = strrchr(file, '/');
  char w[32];
  printf("FAIL %s: %s [%s:%d]\n", who(w, sizeof w), msg, base ? base + 1 : file, line);
  fflush(stdout);
  atomic_fetch_add(&g_failures, 1);
}

void abi_pass(void) { atomic_fetch_add(&g_passes, 1); }

int abi_failures(void) { return atomic_load(&g_failures); }

static void print_summary(void) {
  char w[32];
  printf("%s: %d checks passed, %d failed\n", who(w, sizeof w), atomic_load(&g_passes),
         atomic_load(&g_failures));
  fflush(stdout);
}

_Noreturn void abi_bail(void) {
  char w[32];
  printf("%s: stopping here after the failure above\n", who(w, sizeof w));
  print_summary();
  _exit(1);
}

void abi_note(const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  char w[32];
  printf("%s: %s\n", who(w, sizeof w), msg);
  fflush(stdout);
}

static const char* safe_str(const char* s) { return s ? s : "(NULL)"; }

static int expect_any(ncclResult_t got, const ncclResult_t* wants, int nwant, const char* expr,
                      ncclComm_t comm, const char* file, int line) {
  int matched = 0;
  for (int i = 0; i < nwant; ++i) matched |= got == wants[i];
  if (!matched) {
    char wanted[160] = "";
    for (int i = 0; i < nwant; ++i) {
      size_t len = strlen(wanted);
      snprintf(wanted + len, sizeof wanted - len, "%s%d (%s)", i ? " or " : "", (int)wants[i],
               safe_str(ncclGetErrorString(wants[i])));
    }
    abi_fail(file, line, "%s returned %d, expected %s (%s, %s)", expr, (int)got, wanted,
             safe_str(ncclGetErrorString(got)), safe_str(ncclGetLastError(comm)));
    return 0;
  }
  if (got != ncclSuccess && got != ncclInProgress) {
    const char* le = ncclGetLastError(comm);
    if (le == NULL || le[0] == '\0') {
      abi_fail(file, line, "%s returned %d (%s) as expected but ncclGetLastError(comm) is empty",
               expr, (int)got, safe_str(ncclGetErrorString(got)));
      return 0;
    }
    const char* ln = ncclGetLastError(NULL);
    if (ln == NULL || ln[0] == '\0') {
      abi_fail(file, line,
               "%s returned %d (%s) as expected but ncclGetLastError(NULL) is empty (NCCL "
               "ignores comm; PyTorch reads ncclGetLastError(NULL))",
               expr, (int)got, safe_str(ncclGetErrorString(got)));
      return 0;
    }
  }
  abi_pass();
  return 1;
}

int abi_expect(ncclResult_t got, ncclResult_t want, const char* expr, ncclComm_t comm,
               const char* file, int line) {
  return expect_any(got, &want, 1, expr, comm, file, line);
}

int abi_expect2(ncclResult_t got, ncclResult_t want1, ncclResult_t want2, const char* expr,
                ncclComm_t comm, const char* file, int line) {
  ncclResult_t wants[2] = {want1, want2};
  return expect_any(got, wants, 2, expr, comm, file, line);
}

void abi_arrive(int idx) { atomic_fetch_add(&g_counters[idx], 1); }

int abi_wait_count(int idx, int count, double seconds) {
  double deadline = abi_now() + seconds;
  while (atomic_load(&g_counters[idx]) < count) {
    if (abi_now() > deadline) return 0;
    abi_sleep(0.001);
  }
  return 1;
}

void abi_barrier(int idx, int nranks) {
  abi_arrive(idx);
  if (!abi_wait_count(idx, nranks, 30.0))
    abi_fail(__FILE__, __LINE__, "barrier %d: only %d of %d ranks arrived within 30 s", idx,
             atomic_load(&g_counters[idx]), nranks);
}

typedef struct {
  void (*fn)(void*);
  void* arg;
} thread_call_t;

static void* thread_main(void* p) {
  thread_call_t* call = (thread_call_t*)p;
  call->fn(call->arg);
  return NULL;
}

void abi_in_thread(void (*fn)(void*), void* arg) {
  thread_call_t call = {fn, arg};
  pthread_t t;
  int rc = pthread_create(&t, NULL, thread_main, &call);
  if (rc != 0) {
    abi_fail(__FILE__, __LINE__, "pthread_create: %s", strerror(rc));
    return;
  }
  pthread_join(t, NULL);
}

static void on_alarm(int sig) {
  (void)sig;
  ssize_t n = write(STDOUT_FILENO, g_alarm_msg, strlen(g_alarm_msg));
  (void)n;
  _exit(3);
}

static int read_all(int fd, void* buf, size_t bytes) {
  char* p = (char*)buf;
  while (bytes > 0) {
    ssize_t n = read(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;
    p += n;
    bytes -= (size_t)n;
  }
  return 1;
}

static int write_all(int fd, const void* buf, size_t bytes) {
  const char* p = (const char*)buf;
  while (bytes > 0) {
    ssize_t n = write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;
    p += n;
    bytes -= (size_t)n;
  }
  return 1;
}

static _Noreturn void run_child(int rank, int read_fd, const abi_run_opts_t* opts,
                                abi_body_fn body) {
  g_rank = rank;
  atomic_store(&g_failures, 0);
  atomic_store(&g_passes, 0);
  snprintf(g_alarm_msg, sizeof g_alarm_msg,
           "FAIL rank %d: watchdog: still running after %d s (a call hung or the library's "
           "timeout did not fire)\n",
           rank, opts->watchdog_seconds);
  signal(SIGALRM, on_alarm);
  alarm((unsigned)opts->watchdog_seconds);

  abi_rank_t r;
  memset(&r, 0, sizeof r);
  r.rank = rank;
  r.nranks = opts->nranks;
  r.nids = opts->nids;
  if (opts->nids > 0 && !read_all(read_fd, r.ids, sizeof(ncclUniqueId) * (size_t)opts->nids)) {
    printf("FAIL rank %d: the parent sent no unique id (its ncclGetUniqueId failed?)\n", rank);
    fflush(stdout);
    _exit(2);
  }
  close(read_fd);
  body(&r);
  print_summary();
  _exit(abi_failures() ? 1 : 0);
}

int abi_run(const char* scenario, const abi_run_opts_t* opts, abi_body_fn body) {
  if (opts->nranks < 1 || opts->nranks > ABI_MAX_RANKS || opts->nids < 0 ||
      opts->nids > ABI_MAX_IDS) {
    printf("FAIL parent: scenario %s: bad harness options\n", scenario);
    return 1;
  }
  g_counters = (atomic_int*)mmap(NULL, sizeof(atomic_int) * ABI_MAX_COUNTERS,
                                 PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (g_counters == MAP_FAILED) {
    printf("FAIL parent: mmap: %s\n", strerror(errno));
    return 1;
  }
  for (int i = 0; i < ABI_MAX_COUNTERS; ++i) atomic_init(&g_counters[i], 0);

  printf("== scenario %s: %d rank(s), watchdog %d s, LANES_TIMEOUT=%s\n", scenario, opts->nranks,
         opts->watchdog_seconds, safe_str(getenv("LANES_TIMEOUT")));
  fflush(stdout);

  pid_t pids[ABI_MAX_RANKS];
  int write_fds[ABI_MAX_RANKS];
  for (int r = 0; r < opts->nranks; ++r) {
    int fds[2];
    if (pipe(fds) != 0) {
      printf("FAIL parent: pipe: %s\n", strerror(errno));
      return 1;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
      printf("FAIL parent: fork: %s\n", strerror(errno));
      return 1;
    }
    if (pid == 0) {
      close(fds[1]);
      for (int k = 0; k < r; ++k) close(write_fds[k]);
      run_child(r, fds[0], opts, body);
    }
    close(fds[0]);
    pids[r] = pid;
    write_fds[r] = fds[1];
  }

  /* Every rank is forked: now the bootstrap roots (threads) may start here. */
  signal(SIGPIPE, SIG_IGN);
  int failed = 0;
  ncclUniqueId ids[ABI_MAX_IDS];
  for (int k = 0; k < opts->nids; ++k) {
    ncclResult_t res = ncclGetUniqueId(&ids[k]);
    if (res != ncclSuccess) {
      printf("FAIL parent: ncclGetUniqueId returned %d (%s, %s)\n", (int)res,
             safe_str(ncclGetErrorString(res)), safe_str(ncclGetLastError(NULL)));
      failed = 1;
      break;
    }
  }
  for (int r = 0; r < opts->nranks; ++r) {
    if (!failed && opts->nids > 0 &&
        !write_all(write_fds[r], ids, sizeof(ncclUniqueId) * (size_t)opts->nids)) {
      printf("FAIL parent: could not hand the ids to rank %d\n", r);
      failed = 1;
    }
    close(write_fds[r]);
  }

  int status[ABI_MAX_RANKS];
  int done[ABI_MAX_RANKS];
  memset(done, 0, sizeof done);
  int remaining = opts->nranks;
  double deadline = abi_now() + opts->watchdog_seconds + 10.0;
  while (remaining > 0) {
    int st = 0;
    pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid > 0) {
      for (int r = 0; r < opts->nranks; ++r)
        if (pids[r] == pid && !done[r]) {
          done[r] = 1;
          status[r] = st;
          --remaining;
        }
      continue;
    }
    if (abi_now() > deadline) {
      for (int r = 0; r < opts->nranks; ++r)
        if (!done[r]) {
          printf("FAIL parent: rank %d still running at the parent's deadline; killing it\n", r);
          kill(pids[r], SIGKILL);
          waitpid(pids[r], &status[r], 0);
          done[r] = 1;
          failed = 1;
        }
      break;
    }
    abi_sleep(0.01);
  }

  for (int r = 0; r < opts->nranks; ++r) {
    int st = status[r];
    int expect_kill = (opts->expect_killed >> r) & 1u;
    if (expect_kill) {
      if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)) {
        printf("FAIL parent: rank %d was to die of SIGKILL but %s %d\n", r,
               WIFEXITED(st) ? "exited with" : "died of signal",
               WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        failed = 1;
      }
    } else if (WIFSIGNALED(st)) {
      printf("FAIL parent: rank %d died of signal %d (%s)\n", r, WTERMSIG(st),
             strsignal(WTERMSIG(st)));
      failed = 1;
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      printf("FAIL parent: rank %d exited with status %d\n", r, WEXITSTATUS(st));
      failed = 1;
    }
  }
  munmap(g_counters, sizeof(atomic_int) * ABI_MAX_COUNTERS);
  g_counters = NULL;
  printf("== scenario %s: %s\n", scenario, failed ? "FAILED" : "passed");
  fflush(stdout);
  return failed;
}
