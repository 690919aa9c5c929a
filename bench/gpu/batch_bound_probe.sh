#!/bin/bash
# Figure 2 of issue 3, taken apart: where 4 and 8 thread ranks lose against 4 and 8
# processes in the 256 MiB host-staged all-reduce (docs/gpu_data_path.md, "Several
# ranks on one GPU"). Each row changes one thing against the default:
#   - the host time inside lanesAllReduce, and --sync-each (no call issued ahead);
#   - LANES_STAGE_OWN_UPLOAD_STREAM=0 (the upload on the reduce stream, which thread
#     ranks used before session 7 where 5 streams each exceeded the hardware queues),
#     at 32 queues and at CUDA's default of 8;
#   - LANES_STAGE_SHARED_STREAMS=1 (the thread ranks of a GPU share one set of
#     internal streams, so their stages take turns as processes' do);
#   - larger chunks (fewer, larger copies), more or fewer slots;
#   - the same knobs on processes.
# Optionally (CTEST=1) the GPU suite first (CTEST_ARGS narrows it, e.g. -R Staged;
# CTEST_ENV sets variables for it alone, e.g. LANES_STAGE_SHARED_STREAMS=1). Every step is time-capped.
# Results: $OUT/summary.txt and $OUT/probe.tgz (every log).
#
#   OUT=dir [CTEST=1] bash bench/gpu/batch_bound_probe.sh      # from the repository root
set -u
. "$(dirname "$0")/batch_lib.sh" # batch_init, build, el, step
batch_init build/probe/out 560
pack() { tar czf "$out/probe.tgz" -C "$logs" .; }

nvidia-smi --query-gpu=index,name,driver_version --format=csv >"$S" 2>&1
build
echo "build $(el)" >>"$S"

[ -n "${CTEST:-}" ] && step ${CTEST_S:-300} ctest_gpu.txt "ctest -L gpu -j6 ${CTEST_ENV:-}" -- \
  env -u LANES_TIMEOUT ${CTEST_ENV:-} ctest --test-dir "$b" -L gpu -j6 --timeout 200 --output-on-failure ${CTEST_ARGS:-}

export CUDA_VISIBLE_DEVICES=0
step 60 reduce_bandwidth.txt "reduce kernel vs D2D copy" -- "$B/lanes_reduce_bandwidth"

probe() { # TITLE ENV... -- ARGS...
  local title=$1
  shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  step 45 bound.txt "$title" -- env "${envs[@]}" "$B/lanes_allreduce_bound" --iters 5 "$@"
}
probe "threads, default" -- --ranks 2,4,8
probe "threads, shared internal streams" LANES_STAGE_SHARED_STREAMS=1 -- --ranks 2,4,8
probe "processes, default" -- --procs --ranks 2,4,8
probe "threads, shared internal streams, 32 MiB chunks" LANES_STAGE_SHARED_STREAMS=1 \
  LANES_STAGE_CHUNK_BYTES=32M -- --ranks 4,8
probe "threads, shared internal streams, 8 slots" LANES_STAGE_SHARED_STREAMS=1 LANES_STAGE_SLOTS=8 \
  -- --ranks 4,8
probe "threads, shared internal streams, 2 slots" LANES_STAGE_SHARED_STREAMS=1 LANES_STAGE_SLOTS=2 \
  -- --ranks 4,8
probe "threads, 2 slots" LANES_STAGE_SLOTS=2 -- --ranks 4,8
probe "processes, 2 slots" LANES_STAGE_SLOTS=2 -- --procs --ranks 4,8
# CUDA's default queue count, which a user who never read docs/env.md runs with.
probe "threads, 8 hardware queues" CUDA_DEVICE_MAX_CONNECTIONS=8 -- --ranks 2,4,8
probe "threads, 8 hardware queues, shared internal streams" CUDA_DEVICE_MAX_CONNECTIONS=8 \
  LANES_STAGE_SHARED_STREAMS=1 -- --ranks 2,4,8
[ -n "${STAGING_COPY:-}" ] &&
  step 60 staging_copy.txt "copy engines into cudaHostAlloc / shm memory" -- "$B/lanes_micro_staging_copy"

pack
{
  grep -hE "vs memcpy|target" "$logs/reduce_bandwidth.txt"
  awk '/^=== [a-z]/{t=$0} /^ +[0-9]+ +(threads|processes)/{print t; print} /time\/bound/{print}' \
    "$logs/bound.txt"
  grep -hE "tests passed|Total Test" "$logs/ctest_gpu.txt" 2>/dev/null
  grep -h "\*\*\*Failed\|Timeout\|Not Run" "$logs/ctest_gpu.txt" 2>/dev/null
} >>"$S" 2>&1
cat "$S"
