#!/bin/bash
# The experiment before the change: LL lines per block 4096 (main) / 2048 / 1024 through a
# switch of that build only (LANES_X_LL_LPB, read where ll_allreduce.cu sizes the grid and
# passed to llGridBlocks; never in the library), defaults otherwise,
# 2 processes on GPU 0 under MPS, P2P off, device buffers, alternating, 3 rounds.
set -u
root=$(pwd)
b=$root/build/g
t0=$(date +%s)
cmake -S "$root" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
ninja -C "$b" lanes-run lanes_all_reduce_perf lanes_all_gather_perf lanes_reduce_scatter_perf lanes_broadcast_perf lanes_reduce_perf >> $OUT/build.log 2>&1 || { tail -40 $OUT/build.log; exit 1; }
echo "built in $(( $(date +%s) - t0 )) s"
export CUDA_VISIBLE_DEVICES=0 LANES_TIMEOUT=60 NCCL_NVLS_ENABLE=0
log=$OUT/lpb.txt
nvidia-smi -L >> $log
for round in 1 2 3; do
  for lpb in 4096 2048 1024; do
    for t in all_reduce all_gather reduce_scatter broadcast reduce; do
      echo "=== round $round lpb $lpb $t" >> $log
      timeout 60 bash bench/gpu/with_mps.sh env LANES_P2P_DISABLE=1 LANES_X_LL_LPB=$lpb \
        $b/bin/lanes-run -n 2 $b/bin/lanes_${t}_perf -b 4K -e 256K -f 2 -n 100 -w 20 --memory device 2>&1 \
        | grep -E '^ +[0-9]+ +[0-9]+ +float|rror|fail' >> $log
    done
  done
  echo "round $round done at $(( $(date +%s) - t0 )) s"
done
python3 bench/results/ll_grid_h100/lines_per_block_switch_summary.py $log > $OUT/summary.txt; cat $OUT/summary.txt
