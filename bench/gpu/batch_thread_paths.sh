#!/bin/bash
# Thread ranks sharing one GPU, by path and size (session 7's last device call):
#   1. the GPU tests of the thread-rank paths;
#   2. 8 B latency of the shared-context path with 2, 4 and 8 thread ranks;
#   3. 512 KiB - 256 MiB sweeps with 2 and 4 thread ranks: the default (slots in GPU
#      memory over P2P, a set of internal streams per rank), the same with one set for
#      the ranks of the GPU (LANES_STAGE_SHARED_STREAMS=1), host staging
#      (LANES_P2P_DISABLE=1: one set by default, and a set per rank), and the
#      shared-context path at every size (LANES_SHARED_CONTEXT_MAX_BYTES=1G).
# Results: $OUT/summary.txt and $OUT/thread_paths.tgz (every log).
#
#   OUT=dir bash bench/gpu/batch_thread_paths.sh      # from the repository root
set -u
. "$(dirname "$0")/batch_lib.sh" # batch_init, build, el, step
batch_init build/thread_paths/out 240
pack() { tar czf "$out/thread_paths.tgz" -C "$logs" .; }

nvidia-smi --query-gpu=index,name,driver_version --format=csv >"$S" 2>&1
build
echo "build $(el)" >>"$S"
step 90 ctest_gpu.txt "ctest -L gpu -R Threads|ContextAllReduce" -- env -u LANES_TIMEOUT \
  ctest --test-dir "$b" -L gpu -R "Threads|ContextAllReduce" -j6 --timeout 80 --output-on-failure

export CUDA_VISIBLE_DEVICES=0
P=$B/lanes_all_reduce_perf
for g in 2 4 8; do
  step 20 latency.txt "8 B, $g thread ranks (default: one context)" -- "$P" -g $g -b 8 -e 8 \
    -n 1000 -w 100 --memory device --bounds=0
done
sweep() { # TITLE G ENV...
  local title=$1 g=$2
  shift 2
  step 25 sweep.txt "$title, $g thread ranks" -- env "$@" "$P" -g "$g" -b 512K -e 256M -f 8 \
    --memory device --bounds=0
}
for g in 2 4; do
  sweep "default" $g LANES_TIMEOUT=60
  sweep "P2P slots, shared streams" $g LANES_STAGE_SHARED_STREAMS=1
  sweep "host staging" $g LANES_P2P_DISABLE=1
  sweep "host staging, stream set per rank" $g LANES_P2P_DISABLE=1 LANES_STAGE_SHARED_STREAMS=0
  sweep "shared context at every size" $g LANES_SHARED_CONTEXT_MAX_BYTES=1G
done

pack
{
  grep -hE "tests passed|Total Test" "$logs/ctest_gpu.txt"
  grep -h "\*\*\*Failed\|Timeout\|Not Run" "$logs/ctest_gpu.txt"
  awk '/^=== /{print} /^ +8 +2 +float/{print}' "$logs/latency.txt"
  awk '/^=== /{print} /^ +[0-9]+ +[0-9]+ +float/{print $1, $6, $10}' "$logs/sweep.txt"
} >>"$S" 2>&1
cat "$S"
