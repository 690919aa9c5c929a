#!/bin/bash
# A/B of the LL grid: old = xexp/old (made here with bash bench/gpu/run.sh --export-tree
# SHA xexp/old; an untracked folder travels to the device machine), new = the working
# tree; 2 and 8 processes on GPU 0 under MPS, P2P off, device buffers, defaults, rounds
# alternating; then ctest -L gpu for the rest of the call. SPECS="NP TOOL,..." picks the
# runs. On the device machine: bash bench/results/ll_grid_h100/ab.sh
set -u
root=$(pwd)
t0=$(date +%s)
conf() { cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90; }
T="lanes-run lanes_all_reduce_perf lanes_all_gather_perf lanes_reduce_perf lanes_reduce_scatter_perf lanes_broadcast_perf"
{ conf xexp/old build/old && ninja -C build/old $T; } > $OUT/build_old.log 2>&1 || { tail -30 $OUT/build_old.log; exit 1; }
echo "old built at $(( $(date +%s) - t0 )) s"
{ conf . build/g && ninja -C build/g; } > $OUT/build_new.log 2>&1 || { tail -40 $OUT/build_new.log; exit 1; }
echo "new built at $(( $(date +%s) - t0 )) s"
export CUDA_VISIBLE_DEVICES=0 LANES_TIMEOUT=60 NCCL_NVLS_ENABLE=0
log=$OUT/ab.txt
nvidia-smi -L >> $log
for round in 1 2 3; do
  for side in old new; do
    b=build/g; [ $side = old ] && b=build/old
    IFS=, read -r -a specs <<<"${SPECS:-2 all_gather,2 reduce,2 all_reduce,2 broadcast,8 reduce,8 all_gather}"
    for spec in "${specs[@]}"; do
      set -- $spec
      echo "=== round $round side $side np $1 $2" >> $log
      timeout 60 bash bench/gpu/with_mps.sh env LANES_P2P_DISABLE=1 \
        $b/bin/lanes-run -n $1 $b/bin/lanes_$2_perf -b 4K -e 256K -f 2 -n 60 -w 10 --memory device 2>&1 \
        | grep -E '^ +[0-9]+ +[0-9]+ +float|rror|fail' >> $log
    done
  done
  echo "round $round done at $(( $(date +%s) - t0 )) s"
done
python3 bench/results/ll_grid_h100/summab.py $log > $OUT/summary.txt; cat $OUT/summary.txt
left=$(( 570 - ($(date +%s) - t0) ))
echo "ctest for ${left} s"
[ $left -gt 60 ] && timeout $left env -u LANES_TIMEOUT ctest --test-dir build/g -L gpu -j6 --timeout 200 ${CTEST_ARGS:-} --output-on-failure > $OUT/ctest_gpu.txt 2>&1
grep -E "tests passed|Total Test|\*\*\*Failed|Timeout|Not Run|^ *[0-9]+/[0-9]+ Test" $OUT/ctest_gpu.txt | tail -8
