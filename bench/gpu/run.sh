#!/bin/bash
# Lanes' device measurements, chosen by job name, in one call to a GPU machine: builds
# what the jobs need, then runs them in the order given, every step time-capped so the
# call ends within its budget. With --compare-commit or --compare-tree it also builds an
# older source tree and runs each step for the old build and then the new one, so both
# see the same machine state.
#
# Results: $OUT/summary.txt (the machine, each step's exit code, then each job's key
# lines) and $OUT/logs.tgz (every log, JSON and PNG). Nothing is written into
# bench/results/: copy what is worth keeping there by hand.
#
#   OUT=dir bash bench/gpu/run.sh [options] JOB...     # --help lists options and jobs
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/bench/gpu/batch_lib.sh" # batch_init, add_side, build, step, digest, pack, el, left

die() {
  echo "run.sh: $*" >&2
  exit 2
}

# --- jobs --------------------------------------------------------------------------
# job NAME TARGETS DIGEST ABOUT registers job_NAME (dashes become underscores): the
# ninja targets it runs ("all" where the tests need everything), an ERE choosing the
# lines of its log that go into the summary, and its line in --help.
JOBS=()
declare -A NEEDS DIGEST ABOUT
job() {
  JOBS+=("$1")
  NEEDS[$1]=$2
  DIGEST[$1]=$3
  ABOUT[$1]=$4
}
# Groups: several jobs under one name, run in this order.
declare -A GROUP=(
  [issue3]="reduce-bandwidth bound latency overlap"
  [multi-gpu]="topo multi-gpu-perf multi-gpu-overlap ctest-spread"
)

CTEST_DIGEST='tests passed|Total Test|\*\*\*Failed|Timeout|Not Run|\*\*\*Skipped'
ROW='^(\[0\])? +[0-9]+ +[0-9]+ +float' # a perf tool's result row
PERF="lanes-run lanes_all_reduce_perf"
TOOLS5="lanes_all_reduce_perf lanes_all_gather_perf lanes_reduce_scatter_perf"
TOOLS5+=" lanes_broadcast_perf lanes_sendrecv_perf"

# Single-GPU figures put every rank on GPU 0; a machine with several GPUs would
# otherwise spread the perf tools' ranks.
one_gpu() {
  export CUDA_VISIBLE_DEVICES=0
  [ -z "$dry" ] || echo "export CUDA_VISIBLE_DEVICES=0"
}

# ngpus: GPUs on the machine ("N" in a dry run without any).
ngpus() {
  local n
  n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  [ "$n" -eq 0 ] && [ -n "$dry" ] && n=N
  echo "$n"
}

# jobdir: a folder of $logs for the job's JSON and plots.
jobdir() {
  [ -n "$dry" ] || mkdir -p "$logs/$jobname"
  echo "$logs/$jobname"
}

# p2p_env MODE: sets envs to the variables of p2p_off (Lanes and NCCL both through host
# memory, as on a GeForce box) or p2p_on (both free to use P2P; INFO says what Lanes chose).
p2p_env() {
  envs=(LANES_DEBUG=INFO LANES_DEBUG_SUBSYS=INIT)
  [ "$1" = p2p_off ] && envs=(LANES_P2P_DISABLE=1 NCCL_P2P_DISABLE=1)
}

# plot_json DIR GPUS: a PNG beside each JSON, drawn by the new build's lanes-plot.
plot_json() {
  local j
  for j in "$1"/*.json; do
    [ -n "$dry" ] && {
      echo "lanes-plot each $1/*.json"
      return
    }
    if [ ! -f "$j" ] || [ "$(left)" -le 20 ]; then continue; fi
    timeout 20 "${BUILD[new]}/bin/lanes-plot" "$j" -o "${j%.json}.png" \
      --title "$(basename "${j%.json}" | tr _ ' ') ${2}xGPU" >/dev/null 2>&1
  done
}

job ctest-gpu all "$CTEST_DIGEST" \
  "every GPU test: ctest -L gpu (CTEST_ARGS, CTEST_ENV, CTEST_S adjust it)"
job_ctest_gpu() {
  local args vars
  read -r -a args <<<"${CTEST_ARGS:-}"
  read -r -a vars <<<"${CTEST_ENV:-}"
  step "${CTEST_S:-300}" "ctest -L gpu${CTEST_ENV:+, $CTEST_ENV}${CTEST_ARGS:+, $CTEST_ARGS}" -- \
    env -u LANES_TIMEOUT "${vars[@]}" ctest --test-dir @build@ -L gpu -j6 --timeout 200 \
    --output-on-failure "${args[@]}"
}

job ctest-spread all "$CTEST_DIGEST" \
  "multi-rank GPU tests, one rank per GPU (CTEST_R picks them)"
job_ctest_spread() {
  local r=${CTEST_R:-DeviceMatrix|DeviceStreams|DeviceErrors|DeviceSingleRank|Staged|Ll}
  step 400 "ctest -L gpu -R $r, one rank per GPU" -- env -u LANES_TIMEOUT LANES_TEST_SPREAD_GPUS=1 \
    ctest --test-dir @build@ -L gpu -j6 --timeout 200 -R "$r" --output-on-failure
}

job abi all "$CTEST_DIGEST" "the NCCL C ABI programs (ctest -R NcclAbi -LE gpu)"
job_abi() {
  step 150 "ctest -R NcclAbi -LE gpu" -- env -u LANES_TIMEOUT \
    ctest --test-dir @build@ -R NcclAbi -LE gpu -j4 --timeout 100 --output-on-failure
}

job reduce-bandwidth lanes_reduce_bandwidth 'vs memcpy|target' \
  "issue 3 fig. 1: reduce kernel vs the same run's D2D cudaMemcpy"
job_reduce_bandwidth() {
  one_gpu
  step 60 "reduce kernel vs D2D copy" -- @bin@/lanes_reduce_bandwidth
}

job mapped-rate lanes_mapped_rate '^ +[0-9]+ +(copy|sm)' \
  "issue 20: a kernel's loads and stores of mapped host memory vs the copy engines, one way and both"
job_mapped_rate() {
  one_gpu
  step 90 "kernel loads/stores of mapped host memory vs copies" -- @bin@/lanes_mapped_rate
}

job observe-overhead "lanes-run lanes_all_reduce_perf lanes_nvtx_recorder" '^\| |^all-reduce|^which nsys' \
  "issue 23: 8 B and 256 MiB device all-reduce with observers off, metrics only, all on"
job_observe_overhead() {
  one_gpu
  step 5 "which nsys" -- sh -c 'echo "which nsys: $(command -v nsys || echo none)"'
  step 240 "observer overhead, 2 thread ranks on one GPU" -- python3 bench/observe/overhead.py \
    @build@ --device --ranks 2 --rounds "${ROUNDS:-5}" --out "$(jobdir)/overhead.md"
}

job bound lanes_allreduce_bound 'time/bound|busbw' \
  "issue 3 fig. 2: 256 MiB vs the staged bound, 2/4/8 threads, processes"
job_bound() {
  one_gpu
  local T=@bin@/lanes_allreduce_bound n
  step 90 "bound, threads" -- "$T" --ranks 2,4,8
  step 40 "bound, threads, a stream set per rank" -- \
    env LANES_STAGE_SHARED_STREAMS=0 "$T" --ranks 4,8
  step 90 "bound, processes" -- "$T" --procs --ranks 2,4,8
  # One process ran 2, 4, 8 in turn above; alone, each count shows what it costs by itself.
  for n in 4 8; do
    step 40 "bound, $n threads in a fresh process" -- "$T" --ranks $n
  done
}

job host-sum "lanes_allreduce_bound lanes-topo" \
  'time/bound|bound parts|^ +[0-9]+ +(threads|processes)|^ *(allreduce|[0-9]+ (B|KiB|MiB|GiB)) ' \
  "issue 19: 256 MiB host summation beside staged vs their bounds, 2/4/8 threads, processes"
job_host_sum() {
  one_gpu
  local T=@bin@/lanes_allreduce_bound n
  step 170 "host summation and staged, threads" -- "$T" --ranks 2,4,8 --iters 5
  step 200 "host summation and staged, processes" -- "$T" --procs --ranks 2,4,8 --iters 5
  # What the default takes for processes of one GPU (slots in host memory), by the probe.
  for n in 2 4 8; do
    step 20 "the default plan, $n processes" -- env LANES_P2P_DISABLE=1 @bin@/lanes-topo \
      --plan --ranks $n --collective allreduce
  done
}

job host-sum-wire "lanes_allreduce_bound lanes-topo" \
  'time/bound|max error|^ +[0-9]+ +(threads|processes)|^ *(allreduce|[0-9]+ (B|KiB|MiB|GiB)) ' \
  "issue 19: 256 MiB host summation with LANES_WIRE=bf16/fp8 beside native and staged, 2/4/8 ranks"
job_host_sum_wire() {
  one_gpu
  local T=@bin@/lanes_allreduce_bound n p=staged,host_sum,host_sum_bf16,host_sum_fp8
  step 200 "staged, host summation native/bf16/fp8, threads" -- "$T" --ranks 2,4,8 --iters 5 \
    --paths $p
  step 230 "staged, host summation native/bf16/fp8, processes" -- "$T" --procs --ranks 2,4,8 \
    --iters 5 --paths $p
  job_plan_wire
}

job plan-wire lanes-topo '^ *(allreduce|[0-9]+ (B|KiB|MiB|GiB)) |device:|^lanes-topo' \
  "issue 19: the default device plan with LANES_WIRE=bf16/fp8 from this machine's probe"
# What the default takes with the wire set (its cost prices the frames' bytes),
# from the figures `lanes-topo --probe` measures here (cached for the plans).
job_plan_wire() {
  local n w
  step 60 "lanes-topo --probe" -- @bin@/lanes-topo --probe
  for w in bf16 fp8; do
    for n in 2 4 8; do
      step 20 "the default plan, $n processes, LANES_WIRE=$w" -- env LANES_P2P_DISABLE=1 \
        LANES_WIRE=$w @bin@/lanes-topo --plan --ranks $n --collective allreduce
    done
  done
}

job tree-device "lanes-run lanes_all_reduce_perf lanes_broadcast_perf lanes_reduce_perf" \
  "$ROW|^=== " \
  "issue 19: the tree against the ring/chain for device buffers (the proxy), 4/8 processes, 8 B-4 MiB"
# Device calls reach the host algorithms through the proxy: each candidate is
# forced there with LANES_ALGO, then the proxy's own choice, then the default.
job_tree_device() {
  one_gpu
  local n c a x
  for x in "all_reduce 4" "all_reduce 8" "broadcast 8" "reduce 8"; do
    read -r c n <<<"$x"
    for a in "$([ "$c" = all_reduce ] && echo ring || echo chain)" tree ""; do
      step 40 "$c, $n processes, proxy/${a:-its choice}" -- env LANES_PROTO=proxy \
        ${a:+LANES_ALGO=$a} @bin@/lanes-run -n "$n" @bin@/lanes_${c}_perf -b 8 -e 4M -f 4 \
        -n 20 -w 5 --memory device
    done
    step 40 "$c, $n processes, the default" -- @bin@/lanes-run -n "$n" @bin@/lanes_${c}_perf \
      -b 8 -e 4M -f 4 -n 20 -w 5 --memory device
  done
}

job calibrate-host-sum "lanes-topo lanes-run lanes_all_reduce_perf lanes_reduce_scatter_perf
  lanes_allreduce_bound" \
  '"(points|median_error_by_algo|regret_within_1_05|regret_max|choice_regret_[a-z0-9_]+|skipped_groups|failed_runs)"|^calibrate:|^[a-z]+ x [0-9]+ ranks|time/bound|^ +[0-9]+ +processes' \
  "issue 19: 256 MiB under MPS (host slots); host summation among the calibrated candidates"
# Host summation needs the slots in host memory: processes of one GPU without
# MPS (they time-slice it), or under MPS with P2P off.
job_calibrate_host_sum() {
  one_gpu
  local d b
  d=$(jobdir)
  step 100 "host summation and staged, processes under MPS, slots in host memory" -- \
    bash bench/gpu/with_mps.sh env LANES_P2P_DISABLE=1 @bin@/lanes_allreduce_bound --procs \
    --ranks 2,4,8 --iters 5
  b=$(($(left) - 30))
  step $((b + 20)) "calibrate, device memory, 2/4/8 processes on GPU 0 (time slices)" -- \
    python3 bench/planner/calibrate.py --build @build@ --memory device --ranks 2,4,8 \
    --collectives allreduce,reducescatter --max 256M --repeat 2 --launch processes \
    --time-budget "$b" --out "$d/processes@tag@"
}

job latency "$PERF" "^(\[0\])? +8 " \
  "issue 3 fig. 3: 8 B all-reduce latency on GPU 0, by path"
job_latency() {
  one_gpu
  local P=@bin@/lanes_all_reduce_perf R=@bin@/lanes-run
  local a=(-b 8 -e 8 -n 1000 -w 100 --memory device --bounds=0)
  step 30 "2 processes on GPU 0 (default: the proxy, up to LANES_SHARED_GPU_PROXY_BYTES)" -- \
    "$R" -n 2 "$P" "${a[@]}"
  step 30 "2 processes on GPU 0, LANES_LL_SHARED_GPU=1 (LL)" -- \
    env LANES_LL_SHARED_GPU=1 "$R" -n 2 "$P" "${a[@]}"
  step 30 "2 processes on GPU 0, proxy" -- \
    env LANES_PROTO=proxy "$R" -n 2 "$P" "${a[@]}"
  local g
  for g in 2 4 8; do
    step 30 "$g thread ranks on GPU 0 (default: one context, the last to call reduces)" -- \
      "$P" -g $g "${a[@]}"
  done
  step 30 "2 thread ranks on GPU 0, staged" -- \
    env LANES_PROTO=^shared_context "$P" -g 2 "${a[@]}"
  step 40 "2 thread ranks on GPU 0, 8 B - 1 MiB (default)" -- \
    "$P" -g 2 -b 8 -e 1M -f 4 --memory device --bounds=0
  step 30 "2 thread ranks on GPU 0, LL" -- \
    env LANES_PROTO=ll_threads,staged,proxy "$P" -g 2 "${a[@]}"
  # INFO and a short timeout, so a stall names where it waits instead of using the budget.
  step 25 "2 thread ranks on GPU 0, proxy" -- env LANES_PROTO=proxy \
    LANES_DEBUG=INFO LANES_TIMEOUT=15 \
    "$P" -g 2 -b 8 -e 8 -n 100 -w 10 --memory device --bounds=0
  step 30 "1 rank vs NCCL (in place is a no-op)" -- \
    "$P" --compare nccl -g 1 -b 8 -e 1M -f 32 --memory device
}

job overlap lanes_overlap_gemm 'fraction|TFLOP|covered' \
  "issue 3 fig. 4: cuBLAS GEMM beside 256 MiB all-reduces, GPU 0"
job_overlap() {
  one_gpu
  step 50 "GEMM overlap, 2 thread ranks" -- env LANES_DEBUG=INFO LANES_DEBUG_SUBSYS=INIT \
    @bin@/lanes_overlap_gemm --m 8192 --seconds 2
}

job mps-clients lanes_allreduce_bound \
  'clients at once|^ +[0-9]+ +client|^# |time/bound|^ +[0-9]+ +processes' \
  "issue 20: how many processes share GPU 0 under MPS, by CUDA_DEVICE_MAX_CONNECTIONS; host summation there"
# Under MPS the clients of a GPU share one pool of hardware queues, and each takes
# CUDA_DEVICE_MAX_CONNECTIONS of them (batch_init exports 32 for thread ranks).
job_mps_clients() {
  one_gpu
  step 120 "clients at once under MPS, by CUDA_DEVICE_MAX_CONNECTIONS" -- \
    bash bench/gpu/with_mps.sh bash bench/gpu/mps_clients.sh unset 4 8 32
  step 150 "host summation and staged, 2/4/8 processes under MPS, 8 queues each" -- \
    bash bench/gpu/with_mps.sh env CUDA_DEVICE_MAX_CONNECTIONS=8 LANES_P2P_DISABLE=1 \
    @bin@/lanes_allreduce_bound --procs --ranks 2,4,8 --iters 5
}

job bound-probe lanes_allreduce_bound '^ +[0-9]+ +(threads|processes)|time/bound' \
  "fig. 2, one knob per row: streams, chunk, slots, hardware queues"
job_bound_probe() {
  one_gpu
  local T=@bin@/lanes_allreduce_bound
  probe() { # TITLE VAR=VALUE... -- ARGS...
    local title=$1 envs=()
    shift
    while [ "$1" != -- ]; do
      envs+=("$1")
      shift
    done
    shift
    step 45 "$title" -- env "${envs[@]}" "$T" --iters 5 "$@"
  }
  probe "threads, default" -- --ranks 2,4,8
  probe "threads, shared internal streams" LANES_STAGE_SHARED_STREAMS=1 -- --ranks 2,4,8
  probe "processes, default" -- --procs --ranks 2,4,8
  probe "threads, shared internal streams, 32 MiB chunks" LANES_STAGE_SHARED_STREAMS=1 \
    LANES_STAGE_CHUNK_BYTES=32M -- --ranks 4,8
  probe "threads, shared internal streams, 8 slots" LANES_STAGE_SHARED_STREAMS=1 \
    LANES_STAGE_SLOTS=8 -- --ranks 4,8
  probe "threads, shared internal streams, 2 slots" LANES_STAGE_SHARED_STREAMS=1 \
    LANES_STAGE_SLOTS=2 -- --ranks 4,8
  probe "threads, 2 slots" LANES_STAGE_SLOTS=2 -- --ranks 4,8
  probe "processes, 2 slots" LANES_STAGE_SLOTS=2 -- --procs --ranks 4,8
  # CUDA's default queue count, which a user who never read docs/env.md runs with.
  probe "threads, 8 hardware queues" CUDA_DEVICE_MAX_CONNECTIONS=8 -- --ranks 2,4,8
  probe "threads, 8 hardware queues, shared internal streams" CUDA_DEVICE_MAX_CONNECTIONS=8 \
    LANES_STAGE_SHARED_STREAMS=1 -- --ranks 2,4,8
}

job staging-copy lanes_micro_staging_copy '' \
  "copy-engine rates into each kind of host staging memory"
job_staging_copy() {
  one_gpu
  step 60 "copy engines into cudaHostAlloc / shm memory" -- @bin@/lanes_micro_staging_copy
}

job staged-collectives \
  "lanes-run lanes_all_gather_perf lanes_broadcast_perf lanes_reduce_scatter_perf" "$ROW" \
  "all-gather, broadcast, reduce-scatter, 2 processes: proxy vs staged"
job_staged_collectives() {
  one_gpu
  local tool staged
  for tool in all_gather broadcast reduce_scatter; do
    for staged in 0 1; do
      step 40 "$tool, 2 processes on GPU 0, LANES_STAGED_COLLECTIVES=$staged" -- \
        env LANES_STAGED_COLLECTIVES=$staged @bin@/lanes-run -n 2 "@bin@/lanes_${tool}_perf" \
        -b 8 -e 256M -f 8 -n 10 -w 3 --memory device --bounds=0
    done
  done
}

job graph-capture lanes_all_reduce_perf '^# -G|rror' \
  "whether an all-reduce accepts CUDA Graph capture (-G 1)"
job_graph_capture() {
  one_gpu
  step 30 "-G 1, 2 thread ranks, 1 MiB" -- \
    @bin@/lanes_all_reduce_perf -g 2 -b 1M -e 1M -n 10 -w 2 -G 1 --memory device --bounds=0
}

job sweep "$PERF" '^# Bounds measured|^(\[0\])? +268435456 |Out of bounds values : [1-9]' \
  "all-reduce 16 B-256 MiB on GPU 0: 2/4/8 threads, 2 processes, bounds"
job_sweep() {
  one_gpu
  local P=@bin@/lanes_all_reduce_perf d
  d=$(jobdir)
  step 60 "2 thread ranks, bounds, JSON" -- env LANES_DEBUG=INFO LANES_DEBUG_SUBSYS=INIT \
    "$P" -g 2 -b 16 -e 256M -f 4 --memory device -J "$d/all_reduce_g2@tag@.json"
  step 60 "4 thread ranks" -- "$P" -g 4 -b 16 -e 256M -f 16 --memory device
  step 60 "8 thread ranks (-t 2 -g 4)" -- "$P" -t 2 -g 4 -b 16 -e 256M -f 16 --memory device
  step 60 "2 processes under lanes-run" -- \
    @bin@/lanes-run -n 2 "$P" -b 16 -e 256M -f 16 --memory device
}

job thread-paths lanes_all_reduce_perf "$ROW" \
  "2 and 4 thread ranks, 512 KiB-256 MiB, by path"
job_thread_paths() {
  one_gpu
  sweep() { # TITLE G VAR=VALUE...
    local title=$1 g=$2
    shift 2
    step 25 "$title, $g thread ranks" -- env "$@" @bin@/lanes_all_reduce_perf -g "$g" \
      -b 512K -e 256M -f 8 --memory device --bounds=0
  }
  local g
  for g in 2 4; do
    sweep "default" $g
    sweep "P2P slots, shared streams" $g LANES_STAGE_SHARED_STREAMS=1
    sweep "host staging" $g LANES_P2P_DISABLE=1
    sweep "host staging, stream set per rank" $g LANES_P2P_DISABLE=1 LANES_STAGE_SHARED_STREAMS=0
    sweep "shared context at every size" $g LANES_SHARED_CONTEXT_MAX_BYTES=1G
  done
}

job shared-gpu "$PERF" "$ROW" \
  "2 processes on GPU 0, 8 B-64 MiB: default vs staged at every size"
job_shared_gpu() {
  one_gpu
  local a=(@bin@/lanes-run -n 2 @bin@/lanes_all_reduce_perf -b 8 -e 64M -f 8 -n 20 -w 5
    --memory device --bounds=0)
  step 30 "2 processes on GPU 0, default" -- "${a[@]}"
  step 40 "2 processes on GPU 0, LANES_SHARED_GPU_PROXY_BYTES=0" -- \
    env LANES_SHARED_GPU_PROXY_BYTES=0 "${a[@]}"
}

job small-mps "lanes-run $TOOLS5" "$ROW|^=== " \
  "issue 20: the five collectives, 2 processes on GPU 0 under MPS, 8 B-4 MiB, P2P on/off, LL to 256 KiB"
# Under MPS the two processes' kernels run at once, as on two GPUs: the sizes of
# issue 20's table, beside NCCL's 2-GPU times there (NCCL refuses two ranks of one
# GPU). P2P on, P2P off (a GeForce box), and P2P off with LL up to its 256 KiB limit.
job_small_mps() {
  one_gpu
  local t mode
  for mode in "LANES_P2P_DISABLE=0" "LANES_P2P_DISABLE=1" \
    "LANES_P2P_DISABLE=1 LANES_LL_MAX_BYTES=256K"; do
    for t in $TOOLS5; do
      # shellcheck disable=SC2086 # the mode is several variables
      step 40 "$t, 2 processes under MPS, $mode" -- bash bench/gpu/with_mps.sh \
        env $mode @bin@/lanes-run -n 2 @bin@/$t -b 8 -e 4M -f 2 -n 100 -w 10 --memory device
    done
  done
}

job simple-mps "lanes-topo lanes-run $TOOLS5 lanes_reduce_perf" "$ROW|^=== " \
  "issue 20: the simple kernel (default) vs without it (^simple), 2 processes on GPU 0 under MPS, P2P off, 8 B-4 MiB"
# The two side by side, each tool in turn: what the mid-size kernel changes.
# The plans come from this machine's probe: assumed inputs are an RTX 4090's.
job_simple_mps() {
  one_gpu
  local t mode
  step 60 "lanes-topo --probe" -- @bin@/lanes-topo --probe
  for t in $TOOLS5 lanes_reduce_perf; do
    for mode in "LANES_PROTO=^simple" ""; do
      # shellcheck disable=SC2086 # the mode is one variable or none
      step 40 "$t, 2 processes under MPS, P2P off, ${mode:-defaults}" -- bash bench/gpu/with_mps.sh \
        env LANES_P2P_DISABLE=1 $mode @bin@/lanes-run -n 2 @bin@/$t -b 8 -e 4M -f 2 -n 100 -w 10 \
        --memory device
    done
  done
}

job mps-paths "lanes-topo lanes-run lanes_all_reduce_perf lanes_reduce_scatter_perf
  lanes_broadcast_perf lanes_all_gather_perf" "$ROW|^=== " \
  "issues 18/20: each device path forced in turn, 2 processes on GPU 0 under MPS, P2P off, 64 KiB-8 MiB"
# What each path takes between processes sharing a GPU under MPS, for pricing
# its hand-offs there (the probe's flag latency is one process's).
job_mps_paths() {
  one_gpu
  local c p
  step 60 "lanes-topo --probe" -- @bin@/lanes-topo --probe
  step 20 "lanes-topo --json (the probed inputs, for re-pricing)" -- \
    bash -c "@bin@/lanes-topo --json > $(jobdir)/topology.json"
  for c in all_reduce reduce_scatter broadcast all_gather; do
    for p in simple staged host_sum; do
      [ "$p" = host_sum ] && [ "$c" != all_reduce ] && [ "$c" != reduce_scatter ] && continue
      step 30 "lanes_${c}_perf, 2 processes under MPS, P2P off, LANES_PROTO=$p,proxy" -- \
        bash bench/gpu/with_mps.sh env LANES_P2P_DISABLE=1 LANES_PROTO=$p,proxy \
        @bin@/lanes-run -n 2 @bin@/lanes_${c}_perf -b 64K -e 8M -f 2 -n 30 -w 5 --memory device
    done
  done
}

job ll-pairs "lanes-run lanes_sendrecv_perf" "$ROW|^=== " \
  "issue 20: device send/recv, LL pair slots (default) vs the staged pair slots (^ll_pairs), 2 and 4 processes under MPS, P2P off"
# The two side by side in one call, each process count in turn.
job_ll_pairs() {
  one_gpu
  local np mode
  for np in 2 4; do
    for mode in "LANES_PROTO=^ll_pairs" ""; do
      # shellcheck disable=SC2086 # the mode is one variable or none
      step 40 "lanes_sendrecv_perf, $np processes under MPS, P2P off, ${mode:-defaults}" -- \
        bash bench/gpu/with_mps.sh env LANES_P2P_DISABLE=1 $mode @bin@/lanes-run -n $np \
        @bin@/lanes_sendrecv_perf -b 8 -e 4M -f 2 -n 100 -w 10 --memory device
    done
  done
}

job ll-grid "lanes-run $TOOLS5 lanes_reduce_perf" "$ROW|^=== " \
  "issue 20: LL on grids of blocks vs the staged path, 2 and 8 processes under MPS, 4 KiB-256 KiB"
# Forced each way (LANES_PROTO), P2P off: what the planner's LL and staged costs are
# fitted to. Send/recv is not an LL collective.
job_ll_grid() {
  one_gpu
  local t np mode nps
  read -r -a nps <<<"${LL_GRID_NPS:-2 8}"
  for np in "${nps[@]}"; do
    for mode in "LANES_PROTO=ll LANES_LL_MAX_BYTES=256K" "LANES_PROTO=^ll,simple"; do
      for t in lanes_all_reduce_perf lanes_all_gather_perf lanes_reduce_scatter_perf \
        lanes_broadcast_perf lanes_reduce_perf; do
        # shellcheck disable=SC2086 # the mode is several variables
        step 30 "$t, $np processes under MPS, $mode" -- bash bench/gpu/with_mps.sh \
          env LANES_P2P_DISABLE=1 $mode @bin@/lanes-run -n $np @bin@/$t -b 4K -e 256K -f 2 \
          -n 50 -w 10 --memory device
      done
    done
  done
}

job nccl-layer "$PERF lanes_nccl" "float" \
  "ncclAllReduce via libnccl.so.2 vs lanesAllReduce, 8 B and 256 MiB"
job_nccl_layer() {
  one_gpu
  local round c=(env LANES_PERF_NCCL_LIB=@build@/lib/libnccl.so.2 @bin@/lanes-run -n 2
    @bin@/lanes_all_reduce_perf --compare nccl --memory device)
  for round in 1 2 3; do
    step 40 "8 B, 2 processes, round $round" -- "${c[@]}" -b 8 -e 8 -n 2000 -w 200
    step 60 "256 MiB, 2 processes, round $round" -- "${c[@]}" -b 256M -e 256M -n 20 -w 5
  done
}

job nccl-layer-small "$PERF lanes_nccl" "float" \
  "the NCCL layer's cost at 8 B: 1 rank, 2 threads, 2 processes"
job_nccl_layer_small() {
  one_gpu
  local round backend P=@bin@/lanes_all_reduce_perf
  local L=LANES_PERF_NCCL_LIB=@build@/lib/libnccl.so.2 a=(--memory device -b 8 -e 8)
  for round in 1 2 3 4 5; do
    step 30 "1 rank, round $round" -- \
      env "$L" "$P" -g 1 -n 5000 -w 500 --compare nccl "${a[@]}"
    step 30 "2 thread ranks, round $round" -- \
      env "$L" "$P" -g 2 -n 5000 -w 500 --compare nccl "${a[@]}"
    step 30 "2 processes, round $round" -- \
      env "$L" @bin@/lanes-run -n 2 "$P" -n 3000 -w 300 --compare nccl "${a[@]}"
  done
  # A --compare run keeps both communicators, and their proxy threads, alive in every
  # process; one library per run shows the layer's cost without that.
  for round in 1 2 3 4 5; do
    for backend in lanes nccl; do
      step 30 "2 processes, --backend $backend, round $round" -- \
        env "$L" @bin@/lanes-run -n 2 "$P" --backend $backend -n 3000 -w 300 "${a[@]}"
    done
  done
}

job torch lanes_nccl "torch all_reduce" \
  "torch.distributed.all_reduce through libnccl.so.2, 2 processes"
job_torch() {
  one_gpu
  step 120 "torch.distributed.all_reduce through the layer, 2 processes" -- python3 \
    bench/compat/torch_allreduce.py --lib @build@/lib/libnccl.so.2 --nprocs 2 --sizes 8,268435456
}

job topo lanes-topo 'GB/s' "lanes-topo --probe: the machine's copy rates"
job_topo() {
  step 60 "lanes-topo --probe" -- @bin@/lanes-topo --probe
}

job cold-start "lanes-run lanes_all_reduce_perf" ' rank [0-9]+, ' \
  "a fresh pair's first host all-reduces of 128 KiB (40 and the tool's own), each timed (shm, then TCP)"
# A fresh pair's calls stay slow for one pass over the transport's ring while
# its pages are first used (bench/results/shm_cold_start): this times it on
# the GPU machine's host, which pages unlike the 2-core VM.
job_cold_start() {
  local d t
  d=$(jobdir)
  for t in shm tcp; do
    step 30 "first calls, 2 ranks, 128 KiB, $t" -- env LANES_FLIGHT_RECORDER=4096 \
      LANES_TRACE_FILE="$d/$t@tag@" LANES_SHM_DISABLE=$([ $t = tcp ] && echo 1 || echo 0) \
      @bin@/lanes-run -n 2 @bin@/lanes_all_reduce_perf --memory host -b 128K -e 128K -n 40 -w 0
    step 10 "call times, $t" -- python3 bench/observe/call_times.py "$d/$t@tag@"
  done
}

job calibrate-gpu "lanes-topo lanes-run lanes_all_reduce_perf lanes_all_gather_perf
  lanes_reduce_scatter_perf lanes_broadcast_perf" \
  '"(points|median_error_by_algo|regret_within_1_05|regret_max|regret_median|choice_regret_[a-z0-9_]+|skipped_groups|failed_runs)"|^calibrate:|^[a-z]+ x [0-9]+ ranks' \
  "planner: device-path costs predicted vs measured, GPU 0, 2/4 threads, processes, MPS"
# cal_budget RUNS: --time-budget for the next of RUNS calibrate.py runs still to go: an
# equal share of what is left, less 20 s for its last group to end and its files to be
# written, at most 150 s.
cal_budget() {
  local t=$(($(left) / ${#sides[@]} / $1 - 20))
  [ "$t" -gt 150 ] && t=150
  [ "$t" -lt 10 ] && t=10
  echo "$t"
}
job_calibrate_gpu() {
  one_gpu
  local d b c=(python3 bench/planner/calibrate.py --build @build@ --memory device --ranks 2,4
    --collectives allreduce,allgather,reducescatter,broadcast --max 64M --repeat 2)
  d=$(jobdir)
  # calibrate.py probes into its OUT/topo_cache.json; the later runs read a copy.
  b=$(cal_budget 3)
  step $((b + 20)) "calibrate, device memory, 2 and 4 thread ranks on GPU 0 (probe first)" -- \
    "${c[@]}" --launch threads --time-budget "$b" --out "$d/threads@tag@"
  for out in processes mps; do
    step 10 "the threads run's topo cache for the $out run" -- \
      install -D -m 644 "$d/threads@tag@/topo_cache.json" "$d/$out@tag@/topo_cache.json"
  done
  b=$(cal_budget 2)
  step $((b + 20)) "calibrate, device memory, 2 and 4 processes on GPU 0" -- \
    "${c[@]}" --launch processes --no-probe --time-budget "$b" --out "$d/processes@tag@"
  # Under MPS the processes' contexts run at once: no time slices, LL and P2P
  # slots between them (Lanes asks CUDA whether the GPU runs MPS).
  b=$(cal_budget 1)
  step $((b + 30)) "calibrate, device memory, 2 and 4 processes on GPU 0 under MPS" -- \
    bash bench/gpu/with_mps.sh "${c[@]}" --launch processes --no-probe --time-budget "$b" \
    --out "$d/mps@tag@"
}

job calibrate-host "lanes-topo lanes-run lanes_all_reduce_perf lanes_all_gather_perf
  lanes_reduce_scatter_perf lanes_broadcast_perf lanes_reduce_perf lanes_gather_perf
  lanes_scatter_perf lanes_alltoall_perf" \
  '"(points|median_error_by_algo|regret_within_1_05|regret_max|regret_median|choice_regret_[a-z0-9_]+|skipped_groups|failed_runs)"|^calibrate:|^[a-z]+ x [0-9]+ ranks' \
  "planner: host-algorithm costs predicted vs measured on the GPU machine's 16 cores, 2/4/8 processes (CALIBRATE_RANKS, CALIBRATE_COLLECTIVES, CALIBRATE_MAX, CALIBRATE_REPEAT)"
# The host model where ranks do not time-share cores (the CI machine has two).
job_calibrate_host() {
  local b=$(($(left) / ${#sides[@]} - 40)) r=${CALIBRATE_RANKS:-2,4,8} c=()
  [ -n "${CALIBRATE_COLLECTIVES:-}" ] && c=(--collectives "$CALIBRATE_COLLECTIVES")
  local what="calibrate, host memory, processes: $r ranks"
  step $((b + 30)) "$what${CALIBRATE_COLLECTIVES:+, $CALIBRATE_COLLECTIVES}" -- \
    python3 bench/planner/calibrate.py --build @build@ --memory host --ranks "$r" "${c[@]}" \
    --launch processes --max "${CALIBRATE_MAX:-256M}" --repeat "${CALIBRATE_REPEAT:-2}" \
    --time-budget "$b" --out "$(jobdir)/host@tag@"
}

job calibrate-mps-p2p-off "lanes-topo lanes-run lanes_all_reduce_perf lanes_all_gather_perf
  lanes_reduce_scatter_perf lanes_broadcast_perf" \
  '"(points|median_error_by_algo|regret_within_1_05|regret_max|regret_median|choice_regret_[a-z0-9_]+|skipped_groups|failed_runs)"|^calibrate:|^[a-z]+ x [0-9]+ ranks' \
  "planner: device-path costs predicted vs measured, 2 processes on GPU 0 under MPS, P2P off (CALIBRATE_REPEAT)"
# The GeForce box's case on one GPU: slots in host memory, every path a
# candidate (the simple kernel, host summation, the staged path, LL, the proxy).
job_calibrate_mps_p2p_off() {
  one_gpu
  local b=$(($(left) / ${#sides[@]} - 40))
  step $((b + 30)) "calibrate, device memory, 2 processes on GPU 0 under MPS, P2P off" -- \
    bash bench/gpu/with_mps.sh env LANES_P2P_DISABLE=1 python3 bench/planner/calibrate.py \
    --build @build@ --memory device --ranks 2 --launch processes \
    --collectives allreduce,allgather,reducescatter,broadcast --max 32M \
    --repeat "${CALIBRATE_REPEAT:-2}" --time-budget "$b" --out "$(jobdir)/mps_p2p_off@tag@"
}

job multi-gpu-perf "lanes-run $TOOLS5" 'Avg bus bandwidth|Out of bounds values : [1-9]' \
  "five perf tools vs NCCL, a process per GPU, 8 B-512 MiB, P2P off/on"
# The five perf tools against NCCL, a process per GPU, per P2P mode: SECONDS
# per step, a TITLE and JSON SUFFIX, the DEFAULT tool order, then the sizes.
perf_tools_vs_nccl() {
  local secs=$1 title=$2 suffix=$3 order=$4 n d mode tool
  shift 4
  n=$(ngpus)
  d=$(jobdir)
  for mode in ${P2P_MODES:-p2p_off p2p_on}; do
    p2p_env "$mode"
    for tool in ${PERF_TOOLS:-$order}; do
      step "$secs" "$tool $mode$title, $n GPUs" -- env "${envs[@]}" @bin@/lanes-run -n "$n" \
        "@bin@/lanes_${tool}_perf" --compare nccl --memory device "$@" \
        -J "$d/${tool}_${mode}${suffix}@tag@.json"
    done
  done
}

job_multi_gpu_perf() {
  perf_tools_vs_nccl "${TOOL_S:-100}" "" "" "all_reduce all_gather reduce_scatter broadcast sendrecv" \
    -b 8 -e 1G -f 4 -n 10 -w 3
  plot_json "$(jobdir)" "$(ngpus)"
}

job multi-gpu-1g "lanes-run $TOOLS5" '^(\[0\])? +1073741824 ' \
  "the same five tools at 1 GiB (8 B x 4^k stops at 512 MiB)"
job_multi_gpu_1g() {
  perf_tools_vs_nccl 70 " 1 GiB" "_1G" "sendrecv all_reduce all_gather reduce_scatter broadcast" \
    -b 1G -e 1G -n 5 -w 2
  plot_json "$(jobdir)" "$(ngpus)"
}

job multi-gpu-overlap lanes_overlap_gemm 'fraction|covered' \
  "GEMM on every GPU beside all-reduces, Lanes and NCCL, P2P off/on"
job_multi_gpu_overlap() {
  local n
  n=$(ngpus)
  local g=(@bin@/lanes_overlap_gemm --gpus "$n" --compare nccl --m 8192 --seconds 2)
  step 75 "GEMM overlap p2p_off, $n GPUs" -- env LANES_PROTO=ll_threads,staged,proxy LANES_P2P_DISABLE=1 \
    NCCL_P2P_DISABLE=1 "${g[@]}"
  # Line-buffered, with INFO and a 20 s collective timeout: a stall here shows where.
  step 75 "GEMM overlap p2p_on, $n GPUs" -- env LANES_PROTO=ll_threads,staged,proxy LANES_P2P_DISABLE=0 \
    LANES_TIMEOUT=20 LANES_DEBUG=INFO LANES_DEBUG_SUBSYS=INIT stdbuf -oL -eL "${g[@]}"
}

job ll-sweep "$PERF" "$ROW" \
  "the LL kernel up to 256 KiB, a process per GPU, P2P off, vs NCCL"
job_ll_sweep() {
  local n
  n=$(ngpus)
  step 40 "all_reduce 8 KiB-1 MiB, LANES_LL_MAX_BYTES=256K, P2P off, $n GPUs" -- \
    env LANES_LL_MAX_BYTES=256K LANES_P2P_DISABLE=1 NCCL_P2P_DISABLE=1 @bin@/lanes-run -n "$n" \
    @bin@/lanes_all_reduce_perf --compare nccl --memory device -b 8K -e 1M -f 2 -n 20 -w 5
}

# --- command line ------------------------------------------------------------------
usage() {
  cat <<EOF
usage: OUT=dir bash bench/gpu/run.sh [options] JOB...
       bash bench/gpu/run.sh --export-tree SHA DIR

Builds the working tree (Release, sm_90, Ninja; only what the jobs run), then runs the
jobs in the order given. Results: \$OUT/summary.txt and \$OUT/logs.tgz (OUT defaults to
build/run/out).

options:
  --budget S            seconds for the whole call, build included (default \$RUN_BUDGET_S
                        or 560); each step is capped by what is left
  --build-dir D         build folder of the working tree (default \$BUILD_DIR or build/g);
                        the old tree's is D-old-<commit>
  --compare-commit SHA  also build commit SHA (git archive into build/compare-src/, needs
                        this repository's .git) and run every step old, then new
  --compare-tree DIR    the same with the old sources in DIR: the device machine gets
                        no .git, so make DIR here with --export-tree
  --export-tree SHA DIR write commit SHA's sources into DIR (new or empty) and exit
  --dry-run             print the build and every step's command; run nothing
  -h, --help            this text

jobs:
EOF
  local j
  for j in "${JOBS[@]}"; do printf '  %-19s %s\n' "$j" "${ABOUT[$j]}"; done
  echo
  echo "groups:"
  for j in "${!GROUP[@]}"; do printf '  %-19s %s\n' "$j" "${GROUP[$j]}"; done | sort
  cat <<EOF

environment: CTEST_ARGS, CTEST_ENV, CTEST_S (ctest-gpu), CTEST_R (ctest-spread),
  CALIBRATE_RANKS, CALIBRATE_COLLECTIVES, CALIBRATE_MAX (calibrate-host), CALIBRATE_REPEAT
  (calibrate-host, calibrate-mps-p2p-off),
  P2P_MODES (p2p_off p2p_on), PERF_TOOLS, TOOL_S (multi-gpu-perf, multi-gpu-1g),
  LL_GRID_NPS (ll-grid's process counts, default "2 8").
EOF
}

# export_tree SHA DIR: SHA's sources in DIR, with the full commit in DIR/.commit.
# Files get the extraction time (tar -m), so a build folder reused for a newer tree
# rebuilds them.
export_tree() {
  local sha
  sha=$([ -e "$root/.git" ] && git -C "$root" rev-parse --verify -q "$1^{commit}") ||
    die "no commit $1 in $root (no .git here? export where the repository's history is)"
  [ -z "$(ls -A "$2" 2>/dev/null)" ] || die "$2 is not empty"
  if ! { mkdir -p "$2" && git -C "$root" archive "$sha" | tar -x -m -C "$2"; }; then
    die "could not write $1 into $2"
  fi
  echo "$sha" >"$2/.commit"
}

budget=${RUN_BUDGET_S:-560}
build_dir=${BUILD_DIR:-$root/build/g}
compare_commit='' compare_tree='' dry='' asked=()
while [ $# -gt 0 ]; do
  case $1 in
  --budget | --build-dir | --compare-commit | --compare-tree)
    [ $# -ge 2 ] || die "$1 needs a value"
    case $1 in
    --budget) budget=$2 ;;
    --build-dir) build_dir=$2 ;;
    --compare-commit) compare_commit=$2 ;;
    --compare-tree) compare_tree=$2 ;;
    esac
    shift 2
    ;;
  --export-tree)
    [ $# -ge 3 ] || die "--export-tree needs SHA and DIR"
    export_tree "$2" "$3"
    echo "$3: $(cat "$3/.commit")"
    exit 0
    ;;
  --dry-run) dry=1 && shift ;;
  -h | --help) usage && exit 0 ;;
  -*) die "unknown option $1 (see --help)" ;;
  *) asked+=("$1") && shift ;;
  esac
done
[[ $budget =~ ^[0-9]+$ ]] || die "--budget takes whole seconds, not $budget"
[ -n "$compare_commit" ] && [ -n "$compare_tree" ] &&
  die "--compare-commit or --compare-tree, not both"
[ ${#asked[@]} -gt 0 ] || die "no job named (see --help)"

# Groups expanded, each job once, in the order first named.
run_jobs=()
declare -A seen
for a in "${asked[@]}"; do
  for j in ${GROUP[$a]:-$a}; do
    [ -n "${ABOUT[$j]+x}" ] || die "unknown job $j; jobs: ${JOBS[*]}; groups: ${!GROUP[*]}"
    [ -n "${seen[$j]:-}" ] || run_jobs+=("$j")
    seen[$j]=1
  done
done

# Paths the caller gave are relative to where it runs; the defaults are in the repository.
out=$(realpath -m "${OUT:-$root/build/run/out}")
build_dir=$(realpath -m "$build_dir")
[ -n "$compare_tree" ] && compare_tree=$(realpath -m "$compare_tree")
cd "$root" || exit 1

batch_init "$out" "$budget" "$dry"
add_side new "$root" "$build_dir"
old_what=
if [ -n "$compare_commit" ]; then
  sha=$([ -e .git ] && git rev-parse --verify -q "$compare_commit^{commit}" 2>/dev/null) ||
    die "no commit $compare_commit here; where .git is missing (the device machine), run
  bash bench/gpu/run.sh --export-tree $compare_commit old
on your own machine and pass --compare-tree old (untracked and not ignored, it travels)"
  old_src=$root/build/compare-src/$sha
  if [ -z "$dry" ] && [ ! -f "$old_src/.commit" ]; then
    rm -rf "$old_src" # a partial extraction
    export_tree "$sha" "$old_src"
  fi
  add_side old "$old_src" "$build_dir-old-${sha:0:12}"
  old_what="commit $sha"
elif [ -n "$compare_tree" ]; then
  [ -f "$compare_tree/CMakeLists.txt" ] ||
    die "--compare-tree $compare_tree: no CMakeLists.txt there"
  old_commit=$(cat "$compare_tree/.commit" 2>/dev/null)
  # A folder per commit: a tree re-extracted with older timestamps must not reuse objects.
  add_side old "$compare_tree" "$build_dir-old${old_commit:+-${old_commit:0:12}}"
  old_what="$compare_tree${old_commit:+ (commit $old_commit)}"
fi

# Summary header: what ran where.
new_what="no .git here"
[ -e .git ] && new_what=$(git describe --always --dirty 2>&1)
{
  echo "# bench/gpu/run.sh ${run_jobs[*]}: $(date -u +%FT%TZ), $(hostname), budget ${budget} s"
  echo "# new: $root ($new_what), build ${BUILD[new]}"
  [ -n "$old_what" ] &&
    echo "# old: $old_what, build ${BUILD[old]}; every step runs old, then new"
  nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total --format=csv
  nvidia-smi topo -m
  df -h /dev/shm | awk 'NR == 2 {print "/dev/shm size " $2 ", free " $4}'
  echo "cpus $(nproc)"
} >>"$S" 2>&1
[ -n "$dry" ] && echo "env: NCCL_NVLS_ENABLE=0 CUDA_DEVICE_MAX_CONNECTIONS=32 LANES_TIMEOUT=60"

# finish: runs however the batch ends (a failed build included): packs the logs, adds
# each job's key lines to the summary and prints it.
finish() {
  [ -n "$dry" ] && return
  pack
  local j
  {
    for j in "${run_jobs[@]}"; do
      if [ -z "${DIGEST[$j]}" ] || [ ! -f "$logs/$j.txt" ]; then continue; fi
      echo "## $j"
      digest "$logs/$j.txt" "${DIGEST[$j]}"
    done
    echo "# total $(el)"
  } >>"$S"
  cat "$S"
}
trap finish EXIT
trap 'exit 143' TERM INT

# The targets: everything if a job needs it, else the union of the jobs' own.
targets=()
for j in "${run_jobs[@]}"; do
  if [ "${NEEDS[$j]}" = all ]; then
    targets=()
    break
  fi
  for t in ${NEEDS[$j]}; do [[ " ${targets[*]} " == *" $t "* ]] || targets+=("$t"); done
done
build new "${targets[@]}"
[ ${#sides[@]} -gt 1 ] && build old "${targets[@]}"

# Each job in a subshell: what it exports stays its own.
for jobname in "${run_jobs[@]}"; do
  [ -n "$dry" ] && printf '\n## %s\n' "$jobname"
  ("job_${jobname//-/_}")
done
