#!/bin/bash
# The GPU-data-path figures of issue 3 in one batch on one GPU (the H200 machine):
# builds the needed targets with ninja, then runs
#   1. lanes_all_reduce_perf on device memory: 2, 4, 8 ranks on GPU 0 as threads (-g N),
#      and 2 ranks as processes under lanes-run;
#   2. the copy bounds it prints ('#' lines above the table, "bounds" in the JSON);
#   3. lanes_allreduce_bound: 256 MiB float32, N = 2, 4, 8 on one GPU, threads and processes;
#   4. lanes_overlap_gemm: cuBLAS bf16 GEMM alone and beside 2 all-reducing ranks;
#   5. 8-byte all-reduce latency, 2 ranks on GPU 0 (and the -G graph-capture answer);
#   then ctest -L gpu. Every step runs under `timeout`, capped by what is left of an
#   overall budget (RUN_BUDGET_S, default 470 s), so the whole script stays under 8 min.
#
#   bash bench/gpu/run_h200.sh            # from the repository root
#
# Outputs (at most 8 files, for the device tool's $OUT): build.log, perf_device.txt,
# perf_device.json, allreduce_bound.txt, overlap_gemm.txt, ctest_gpu.txt, summary.txt —
# under $OUT if set, else build/h200/out. The summary is also printed at the end.
set -uo pipefail

cd "$(dirname "$0")/../.." || exit 1
start=$(date +%s)
budget=${RUN_BUDGET_S:-470}
build=${BUILD_DIR:-build/h200}
out=${OUT:-$build/out}
mkdir -p "$out"
bin=$build/bin
summary=$out/summary.txt
: >"$summary"

left() { echo $((budget - ($(date +%s) - start))); }
note() { echo "$*" | tee -a "$summary"; }
# step SECONDS LOGFILE TITLE -- CMD...: runs CMD under timeout min(SECONDS, time left - 5),
# appending a titled block to LOGFILE; a step with no time left is skipped and says so.
step() {
  local want=$1 log=$2 title=$3
  shift 4
  local cap=$(($(left) - 5))
  local t=$((want < cap ? want : cap))
  {
    echo
    echo "=== $title"
    echo "\$ $*"
  } >>"$log"
  if [ "$t" -lt 10 ]; then
    echo "SKIPPED: out of time budget" >>"$log"
    note "SKIPPED (time budget): $title"
    return 0
  fi
  timeout -k 5 "$t" "$@" >>"$log" 2>&1
  local rc=$?
  echo "=== exit $rc ($title)" >>"$log"
  [ $rc -eq 124 ] && note "TIMED OUT after ${t}s: $title"
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && note "exit $rc: $title"
  return 0
}

note "# run_h200.sh $(date -u +%FT%TZ) on $(hostname)"
{
  nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total --format=csv
  nvidia-smi topo -m 2>/dev/null | head -5
  df -h /dev/shm | tail -1 | awk '{print "/dev/shm size " $2 ", free " $4 " (the staged arena needs (N+1) x 16 MiB)"}'
  nproc | sed 's/^/cpus /'
} >>"$summary" 2>&1

# --- build ------------------------------------------------------------------------
targets=(lanes_all_reduce_perf lanes-run lanes_allreduce_bound lanes_overlap_gemm)
tests=ON
if ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DLANES_BUILD_TESTS=ON >"$out/build.log" 2>&1; then
  # GoogleTest may be missing on the GPU image: build the tools without tests.
  note "configure with tests failed (GoogleTest missing?); building without tests, ctest skipped"
  tests=OFF
  rm -f "$build/CMakeCache.txt"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DLANES_BUILD_TESTS=OFF >>"$out/build.log" 2>&1 || {
    note "configure failed: see build.log"
    tail -30 "$out/build.log"
    exit 1
  }
fi
step 300 "$out/build.log" "build the tools" -- ninja -C "$build" "${targets[@]}"
[ "$tests" = ON ] &&
  step 200 "$out/build.log" "build the GPU tests" -- ninja -C "$build" lanes_gpu_tests lanes_gpu_kernel_tests
for t in "${targets[@]}"; do
  [ -x "$bin/$t" ] || note "MISSING after build: $bin/$t (see build.log)"
done
note "# build done at +$(($(date +%s) - start)) s"

export LANES_TIMEOUT=${LANES_TIMEOUT:-60}  # a stuck collective fails in 60 s, not 300
export CUDA_DEVICE_MAX_CONNECTIONS=32       # the tools set it too; kept for lanes-run children
perf=$bin/lanes_all_reduce_perf
plog=$out/perf_device.txt
: >"$plog"

# --- 5. latency first (short), and what -G gets ----------------------------------
step 40 "$plog" "5. 8-byte all-reduce latency, 2 ranks on GPU 0 (threads)" -- \
  "$perf" -g 2 -b 8 -e 8 -n 1000 -w 100 --memory device --bounds=0
step 30 "$plog" "5b. -G 1: does Lanes accept CUDA Graph capture? (2 ranks, 1 MiB)" -- \
  "$perf" -g 2 -b 1M -e 1M -n 10 -w 2 -G 1 --memory device --bounds=0

# --- 3. all-reduce vs the host-staged bound, threads ------------------------------
blog=$out/allreduce_bound.txt
: >"$blog"
step 90 "$blog" "3. 256 MiB all-reduce vs bound, N=2,4,8 ranks on GPU 0 as threads" -- \
  env LANES_DEBUG=INFO LANES_DEBUG_SUBSYS=INIT "$bin/lanes_allreduce_bound" --ranks 2,4,8

# --- 4. GEMM overlap --------------------------------------------------------------
glog=$out/overlap_gemm.txt
: >"$glog"
step 60 "$glog" "4. cuBLAS bf16 GEMM 8192^3 alone and beside 2 all-reducing ranks" -- \
  env LANES_DEBUG=INFO LANES_DEBUG_SUBSYS=INIT "$bin/lanes_overlap_gemm" --m 8192 --seconds 2

# --- 1+2. sweeps on device memory with the bounds header --------------------------
step 60 "$plog" "1+2. all-reduce sweep, 2 ranks on GPU 0 (-g 2), bounds, JSON" -- \
  env LANES_DEBUG=INFO LANES_DEBUG_SUBSYS=INIT \
  "$perf" -g 2 -b 16 -e 256M -f 4 --memory device -J "$out/perf_device.json"

# --- 3. processes -----------------------------------------------------------------
step 90 "$blog" "3. 256 MiB all-reduce vs bound, N=2,4,8 ranks on GPU 0 as processes" -- \
  env LANES_DEBUG=INFO LANES_DEBUG_SUBSYS=INIT "$bin/lanes_allreduce_bound" --procs --ranks 2,4,8

# --- 1. more ranks per GPU, and processes under lanes-run -------------------------
step 60 "$plog" "1. all-reduce sweep, 4 ranks on GPU 0 (-g 4)" -- \
  "$perf" -g 4 -b 16 -e 256M -f 16 --memory device
step 60 "$plog" "1. all-reduce sweep, 8 ranks on GPU 0 (-t 2 -g 4)" -- \
  "$perf" -t 2 -g 4 -b 16 -e 256M -f 16 --memory device
step 60 "$plog" "1. all-reduce sweep, 2 processes under lanes-run (GPU = local rank % 1)" -- \
  "$bin/lanes-run" -n 2 "$perf" -b 16 -e 256M -f 16 --memory device

# --- ctest -L gpu (the lead's part) -----------------------------------------------
if [ "$tests" = ON ]; then
  : >"$out/ctest_gpu.txt"
  step 400 "$out/ctest_gpu.txt" "ctest -L gpu -j8" -- \
    env -u LANES_TIMEOUT -u CUDA_DEVICE_MAX_CONNECTIONS \
    ctest --test-dir "$build" -L gpu -j8 --output-on-failure
fi

# --- summary ----------------------------------------------------------------------
{
  echo
  echo "## bounds (perf tool, 2-rank run)"
  grep -A4 '^# Bounds measured' "$plog" | head -6
  echo "## 8-byte latency (time column, us; out-of-place then in-place)"
  awk '/=== 5\. 8-byte/{f=1} f && /^ +8 /{print; exit}' "$plog"
  echo "## -G"
  grep -m2 '^# -G' "$plog"
  echo "## 256 MiB rows of the sweeps"
  grep -E '^ +268435456 ' "$plog"
  echo "## wrong values / failures in sweeps"
  grep -E 'Out of bounds values|failed' "$plog"
  echo "## all-reduce vs bound"
  grep -E '^ +[0-9]+  (threads|processes)|time/bound' "$blog"
  echo "## path chosen (INFO)"
  cat "$plog" "$blog" "$glog" | grep -o 'device all-reduce: [^,]*' | sort | uniq -c
  echo "## GEMM overlap"
  grep -E '^(solo|concurrent|fraction|all-reduce)' "$glog"
  if [ -s "$out/ctest_gpu.txt" ]; then
    echo "## ctest -L gpu"
    grep -E 'tests passed|tests failed|Failed|\(Failed\)|Timeout|SKIPPED|Not Run' "$out/ctest_gpu.txt" | tail -20
  fi
  echo "# total $(($(date +%s) - start)) s"
} >>"$summary" 2>&1
cat "$summary"
