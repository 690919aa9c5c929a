/* An MPI program that joins Lanes: it calls MPI_Init itself, then
 * lanesCommInitFromEnv takes the unique id over that MPI (and leaves
 * MPI_Finalize to the program), then both agree on one sum. */
#include <lanes/lanes.h>
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  lanesComm_t comm;
  if (lanesCommInitFromEnv(&comm, NULL) != lanesSuccess) {
    fprintf(stderr, "rank %d: %s\n", rank, lanesGetLastError(NULL));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int lanesRank = -1;
  lanesCommUserRank(comm, &lanesRank);
  double x = rank + 1, viaLanes = 0, viaMpi = 0;
  lanesResult_t r = lanesAllReduce(&x, &viaLanes, 1, lanesFloat64, lanesSum, comm, NULL);
  MPI_Allreduce(&x, &viaMpi, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  int ok = r == lanesSuccess && lanesRank == rank && viaLanes == viaMpi;
  printf("mpi rank %d: lanes rank %d, sum %g over Lanes, %g over MPI%s\n", rank, lanesRank,
         viaLanes, viaMpi, ok ? "" : ", WRONG");
  lanesCommDestroy(comm);
  MPI_Finalize();
  return ok ? 0 : 1;
}
