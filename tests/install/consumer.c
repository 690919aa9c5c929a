/* A program an installed Lanes must build and run: C, via find_package or pkg-config. */
#include <lanes/lanes.h>
#include <stdio.h>

int main(void) {
  int version = 0;
  if (lanesGetVersion(&version) != lanesSuccess || version != LANES_VERSION_CODE) return 1;
  lanesComm_t comm;
  if (lanesCommInitAll(&comm, 1, NULL) != lanesSuccess) return 2;
  float v[3] = {1, 2, 3};
  if (lanesAllReduce(v, v, 3, lanesFloat32, lanesSum, comm, NULL) != lanesSuccess) return 3;
  lanesCommDestroy(comm);
  printf("lanes %d: all-reduce ok\n", version);
  return v[2] == 3.0f ? 0 : 4;
}
