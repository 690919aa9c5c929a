#!/bin/bash
# Grid size against time, the grid build with LL_X_BLOCKS capping its blocks.
set -u
cmake -S .llx -B build/llx -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null &&
  ninja -C build/llx lanes-run lanes_all_reduce_perf lanes_all_gather_perf lanes_broadcast_perf lanes_reduce_perf >/dev/null || exit 1
B=build/llx/bin
run() { # NP TOOL BLOCKS
  echo "== $2 $1 processes, blocks $3"
  timeout 40 bash bench/gpu/with_mps.sh env LANES_P2P_DISABLE=1 LANES_PROTO=ll LANES_LL_MAX_BYTES=256K \
    LL_X_BLOCKS=$3 $B/lanes-run -n $1 $B/lanes_$2_perf -b 8K -e 256K -f 4 -n 50 -w 10 --memory device |
    grep -E '^ +[0-9]+ '
}
for x in 1 2 4 8 32; do
  run 2 all_reduce $x
  run 2 all_gather $x
  run 8 broadcast $x
  run 8 reduce $x
done
