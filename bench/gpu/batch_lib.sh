#!/bin/bash
# Shared by the device batches (sourced): a time-capped, logged step.
# Needs: t0 (start, epoch seconds), budget (seconds for the whole batch),
# S (summary file), logs (folder of the step logs).

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
