#!/bin/bash
# Issue 3 in one device batch (ranks share GPU 0): build, ctest -L gpu, then the four
# figures with the diagnostics behind them. Every step runs under `timeout`, capped
# by what is left of RUN_BUDGET_S (default 560 s).
# Results: $OUT/summary.txt and $OUT/issue3.tgz (every log).
#
#   OUT=dir bash bench/gpu/batch_final.sh        # from the repository root
set -u
. "$(dirname "$0")/batch_lib.sh" # batch_init, build, el, step
batch_init build/h200/out 560
pack() { tar czf "$out/issue3.tgz" -C "$logs" .; }

{
  nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv
  nproc | sed 's/^/cpus /'
} >"$S" 2>&1
build
echo "build $(el)" >>"$S"

# The GPU tests first: they decide whether the figures below mean anything.
[ -z "${SKIP_CTEST:-}" ] && step ${CTEST_S:-300} ctest_gpu.txt "ctest -L gpu -j6" -- env -u LANES_TIMEOUT \
  ctest --test-dir "$b" -L gpu -j6 --timeout 200 --output-on-failure ${CTEST_ARGS:-}

# Why the staged pipeline misses its bound: copy rates into each kind of host memory.
[ -n "${STAGING_COPY:-}" ] &&
  step 60 staging_copy.txt "copy engines into cudaHostAlloc / shm memory" -- "$B/lanes_micro_staging_copy"

# Every rank on GPU 0 (a machine with several GPUs would spread the perf tool's ranks).
export CUDA_VISIBLE_DEVICES=0

# All-gather, broadcast and reduce-scatter of 2 processes on GPU 0: the proxy
# (LANES_STAGED_COLLECTIVES=0) beside the staged path (the default since session 5).
[ -n "${STAGED_COMPARE:-}" ] && for tool in all_gather broadcast reduce_scatter; do
  for staged in 0 1; do
    step 40 staged_collectives.txt "$tool, 2 processes on GPU 0, LANES_STAGED_COLLECTIVES=$staged" -- \
      env LANES_STAGED_COLLECTIVES=$staged "$B/lanes-run" -n 2 "$B/lanes_${tool}_perf" \
      -b 8 -e 256M -f 8 -n 10 -w 3 --memory device --bounds=0
  done
done

# Figure 1: the reduce kernel against the same run's D2D cudaMemcpy.
step 60 reduce_bandwidth.txt "reduce kernel vs D2D copy" -- "$B/lanes_reduce_bandwidth"

# Figure 2: 256 MiB vs the bound, threads (the staged path, submission-ordered
# since session 6, one set of internal streams for all since session 7) and
# processes; then 4 and 8 thread ranks each in a fresh process.
step 90 bound.txt "bound, threads" -- "$B/lanes_allreduce_bound" --ranks 2,4,8
step 40 bound.txt "bound, threads, a stream set per rank (before session 7)" -- \
  env LANES_STAGE_SHARED_STREAMS=0 "$B/lanes_allreduce_bound" --ranks 4,8
[ -z "${SKIP_PROCS_BOUND:-}" ] &&
  step 90 bound.txt "bound, processes" -- "$B/lanes_allreduce_bound" --procs --ranks 2,4,8
[ -z "${SKIP_PROCS_BOUND:-}" ] && for n in 4 8; do
  step 40 bound.txt "bound, $n threads in a fresh process" -- "$B/lanes_allreduce_bound" --ranks $n
done

# Figure 3: 8 B latency, 2 ranks on one GPU, by path.
lat() { step 30 latency.txt "$1" -- env ${2:+$2} "${@:3}" -b 8 -e 8 -n 1000 -w 100 --memory device --bounds=0; }
P=$B/lanes_all_reduce_perf
lat "2 processes on GPU 0 (default: the proxy, up to LANES_SHARED_GPU_PROXY_BYTES; LL refused)" "" "$B/lanes-run" -n 2 "$P"
lat "2 processes on GPU 0, LANES_LL_SHARED_GPU=1 (LL)" "LANES_LL_SHARED_GPU=1" "$B/lanes-run" -n 2 "$P"
lat "2 processes on GPU 0, proxy" "LANES_LL_DISABLE=1 LANES_STAGED_DISABLE=1" "$B/lanes-run" -n 2 "$P"
lat "2 thread ranks on GPU 0 (default: one context, the last to call reduces)" "" "$P" -g 2
lat "4 thread ranks on GPU 0 (default: one context)" "" "$P" -g 4
lat "8 thread ranks on GPU 0 (default: one context)" "" "$P" -g 8
lat "2 thread ranks on GPU 0, staged" "LANES_SHARED_CONTEXT_DISABLE=1" "$P" -g 2
step 40 latency.txt "2 thread ranks on GPU 0, 8 B - 1 MiB (default)" -- "$P" -g 2 -b 8 -e 1M -f 4 \
  --memory device --bounds=0
lat "2 thread ranks on GPU 0, LL" "LANES_SHARED_CONTEXT_DISABLE=1 LANES_THREAD_FASTPATH=1" "$P" -g 2
step 25 latency.txt "2 thread ranks on GPU 0, proxy (stalled in session 6)" -- env LANES_STAGED_DISABLE=1 \
  LANES_SHARED_CONTEXT_DISABLE=1 LANES_DEBUG=INFO LANES_TIMEOUT=15 "$P" -g 2 -b 8 -e 8 -n 100 -w 10 \
  --memory device --bounds=0
step 30 latency.txt "1 rank vs NCCL (in place is a no-op)" -- "$P" --compare nccl -g 1 -b 8 -e 1M -f 32 --memory device

# Figure 4: GEMM beside 256 MiB all-reduces on the GPU-driven path.
step 50 overlap.txt "GEMM overlap, 2 thread ranks, staged" -- env LANES_DEBUG=INFO LANES_DEBUG_SUBSYS=INIT "$B/lanes_overlap_gemm" --m 8192 --seconds 2

pack
{
  grep -hE "vs memcpy|target" "$logs/reduce_bandwidth.txt"
  grep -hE "time/bound|busbw" "$logs/bound.txt"
  grep -hE "^(\[0\])? +8 " "$logs/latency.txt"
  grep -hE "fraction|TFLOP|covered" "$logs/overlap.txt"
  grep -hE "tests passed|Total Test" "$logs/ctest_gpu.txt"
  grep -h "\*\*\*Failed\|Timeout\|Not Run" "$logs/ctest_gpu.txt"
} >>"$S" 2>&1
cat "$S"
