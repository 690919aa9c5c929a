#!/bin/bash
# Shared by the device batches (sourced): their common set-up, the build, and a
# time-capped, logged step.

# batch_init DEFAULT_OUT DEFAULT_BUDGET_S: out ($OUT or the default, absolute), logs (a
# fresh folder), b and B (build and bin folders, $BUILD_DIR), S (summary file), t0,
# budget ($RUN_BUDGET_S or the default); the environment every run wants (NVLink
# multicast off: the machines' rule).
batch_init() {
  out=${OUT:-$1}
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
  logs=$(mktemp -d)
  b=${BUILD_DIR:-build/g}
  B=$b/bin
  S=$out/summary.txt
  export NCCL_NVLS_ENABLE=0 CUDA_DEVICE_MAX_CONNECTIONS=32 LANES_TIMEOUT=60
  t0=$(date +%s)
  budget=${RUN_BUDGET_S:-$2}
}

# el: seconds since the batch started, as "+Ns".
el() { echo "+$(($(date +%s) - t0))s"; }

# step SECONDS LOG TITLE -- CMD...: runs CMD under timeout (SECONDS, capped by what is
# left of the budget), appends a titled block to $logs/LOG and "rc TITLE" to $S.
step() {
  local want=$1 log=$logs/$2 title=$3
  shift 4
  local cap=$((budget - ($(date +%s) - t0) - 10))
  local t=$((want < cap ? want : cap))
  printf '\n=== %s\n$ %s\n' "$title" "$*" >>"$log"
  if [ "$t" -lt 5 ]; then
    echo "SKIPPED (time budget): $title" | tee -a "$S" >>"$log"
    return 0
  fi
  timeout -k 5 "$t" "$@" >>"$log" 2>&1
  local rc=$?
  echo "=== exit $rc" >>"$log"
  echo "$(el) rc=$rc $title" >>"$S"
}

# build: configures and builds $b (Release, sm_90) with its log in $logs/build.log; on
# failure shows the log's tail in $S, runs pack (the caller's) and exits 1.
build() {
  cmake -S . -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    >"$logs/build.log" 2>&1 && ninja -C "$b" >>"$logs/build.log" 2>&1 && return 0
  tail -40 "$logs/build.log" | tee -a "$S"
  pack
  exit 1
}
