/* mpi_allreduce_perf / mpi_allgather_perf (this file built with
 * MPI_COLL_ALLGATHER): MPI_Allreduce (float, sum) or MPI_Allgather (float)
 * timed the way lanes_all_reduce_perf / lanes_all_gather_perf time Lanes,
 * printing the same columns (all-gather: size is the whole output, as in
 * nccl-tests), so compare_allreduce.sh and netns_tcp_compare.sh can put them
 * side by side.
 * Flags: -b minbytes -e maxbytes -f stepfactor -n iters -w warmup (K/M/G ok). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int parseSize(const char* s, size_t* out) {
  char* end = NULL;
  double v = strtod(s, &end);
  if (end == s || v < 0) return 0;
  double unit = 1;
  if (*end == 'K' || *end == 'k')
    unit = 1024.0, ++end;
  else if (*end == 'M' || *end == 'm')
    unit = 1024.0 * 1024, ++end;
  else if (*end == 'G' || *end == 'g')
    unit = 1024.0 * 1024 * 1024, ++end;
  if (*end != '\0') return 0;
  *out = (size_t)(v * unit);
  return 1;
}

static void fmt(char* buf, size_t len, double v, int width) {
  int power = 0;
  for (double p = 1; v >= p && power < 20; p *= 10) power++;
  if (power < width - 2)
    snprintf(buf, len, "%*.2f", width, v);
  else if (power < width - 1)
    snprintf(buf, len, "%*.1f", width, v);
  else if (power < width + 1)
    snprintf(buf, len, "%*.0f", width, v);
  else
    snprintf(buf, len, "%*.1e", width, v);
}

#ifdef MPI_COLL_ALLGATHER
#define COLL_NAME "MPI_Allgather float"
#define COLL_TOOL "mpi_allgather_perf"
#define COLL_REDOP "none"
#define BUS_FACTOR(n) ((double)((n) - 1) / (n))
/* `count` is the whole output; each rank gives count / nranks. */
static void collective(float* send, float* recv, size_t count, int inPlace, int nranks) {
  int each = (int)(count / (size_t)nranks);
  MPI_Allgather(inPlace ? MPI_IN_PLACE : send, each, MPI_FLOAT, recv, each, MPI_FLOAT,
                MPI_COMM_WORLD);
}
#else
#define COLL_NAME "MPI_Allreduce float sum"
#define COLL_TOOL "mpi_allreduce_perf"
#define COLL_REDOP "sum"
#define BUS_FACTOR(n) (2.0 * ((n) - 1) / (n))
static void collective(float* send, float* recv, size_t count, int inPlace, int nranks) {
  (void)nranks;
  MPI_Allreduce(inPlace ? MPI_IN_PLACE : send, recv, (int)count, MPI_FLOAT, MPI_SUM,
                MPI_COMM_WORLD);
}
#endif

/* Mean time per call across ranks, in seconds. */
static double timeCollective(float* send, float* recv, size_t count, int iters, int inPlace,
                             int nranks) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < iters; ++i) collective(send, recv, count, inPlace, nranks);
  double dt = (MPI_Wtime() - t0) / iters, sum = 0;
  MPI_Allreduce(&dt, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return sum / nranks;
}

int main(int argc, char** argv) {
  size_t minBytes = 8, maxBytes = 64u << 20, factor = 4;
  int iters = 20, warmup = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char* f = argv[i];
    const char* v = argv[i + 1];
    int ok = 1;
    if (!strcmp(f, "-b"))
      ok = parseSize(v, &minBytes);
    else if (!strcmp(f, "-e"))
      ok = parseSize(v, &maxBytes);
    else if (!strcmp(f, "-f"))
      ok = (factor = strtoul(v, NULL, 10)) >= 2;
    else if (!strcmp(f, "-n"))
      ok = (iters = atoi(v)) > 0;
    else if (!strcmp(f, "-w"))
      ok = (warmup = atoi(v)) >= 0;
    else
      ok = 0;
    if (!ok) {
      fprintf(stderr, COLL_TOOL ": bad option %s %s (takes -b -e -f -n -w)\n", f, v);
      return 2;
    }
  }
  MPI_Init(&argc, &argv);
  int rank, nranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  size_t maxCount = maxBytes / sizeof(float) + 1;
  float* send = calloc(maxCount, sizeof(float));
  float* recv = calloc(maxCount * (size_t)nranks, sizeof(float));
  if (!send || !recv) {
    fprintf(stderr, COLL_TOOL ": out of memory for %zu bytes\n", maxBytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (size_t i = 0; i < maxCount; ++i) send[i] = (float)((rank + i) % 3);
  if (rank == 0) {
    printf("# " COLL_NAME ", %d ranks, iters %d warmup %d\n#\n", nranks, iters, warmup);
    printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place\n",
           "", "", "", "", "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count",
           "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
           "#wrong");
  }
  double bwSum = 0;
  int bwCount = 0;
  for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= factor) {
    size_t count = bytes / sizeof(float);
#ifdef MPI_COLL_ALLGATHER
    count -= count % (size_t)nranks;
#endif
    if (count == 0) continue;
    for (int i = 0; i < warmup; ++i) collective(send, recv, count, 0, nranks);
    double t[2];
    for (int inPlace = 0; inPlace < 2; ++inPlace) {
      if (inPlace) memcpy(recv, send, count * sizeof(float));
      t[inPlace] = timeCollective(send, recv, count, iters, inPlace, nranks);
    }
    if (rank == 0) {
      printf("%12zu  %12zu  %8s  %6s  %6i", count * sizeof(float), count, "float", COLL_REDOP, -1);
      for (int k = 0; k < 2; ++k) {
        double alg = (double)(count * sizeof(float)) / 1e9 / t[k];
        double bus = alg * BUS_FACTOR(nranks);
        char ts[32], as[32], bs[32];
        fmt(ts, sizeof ts, t[k] * 1e6, 7);
        fmt(as, sizeof as, alg, 6);
        fmt(bs, sizeof bs, bus, 6);
        printf("  %7s  %6s  %6s    N/A", ts, as, bs);
        bwSum += bus;
        ++bwCount;
      }
      printf("\n");
      fflush(stdout);
    }
    if (bytes == 0) break;
  }
  if (rank == 0) {
    printf("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : %g \n#\n",
           bwCount ? bwSum / bwCount : 0.0);
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
