#!/bin/bash
# The machinery of bench/gpu/run.sh (sourced): set-up, builds, the time-capped and
# logged step, packing. Each step runs once per side: "new" (the working tree) and,
# when comparing, "old" just before it, so both builds see the same machine state.

# Per side: its source root, its build folder, and a suffix (@tag@) that keeps its
# output files apart from the other side's.
declare -A SRC BUILD TAG
sides=(new)
jobname=none # the job running; run.sh sets it, step logs to $logs/$jobname.txt

# batch_init OUT BUDGET_S DRY: out (absolute), logs (a fresh folder), S (summary file),
# t0, budget, dry; the environment every run wants (NVLink multicast off: the
# machines' rule; 32 hardware queues; a stuck collective fails in 60 s, not 300).
# A dry run creates nothing: out and logs are placeholders.
batch_init() {
  dry=$3
  budget=$2
  t0=$(date +%s)
  export NCCL_NVLS_ENABLE=0 CUDA_DEVICE_MAX_CONNECTIONS=32 LANES_TIMEOUT=60
  if [ -n "$dry" ]; then
    out='<out>' logs='<logs>' S=/dev/null
    return
  fi
  mkdir -p "$1" || exit 1
  out=$(cd "$1" && pwd)
  logs=$(mktemp -d)
  S=$out/summary.txt
  : >"$S"
}

# add_side NAME SRC BUILD: registers "new" or "old"; once there is an old side, every
# step runs it first and each side's files carry its name.
add_side() {
  SRC[$1]=$2
  BUILD[$1]=$3
  TAG[$1]=
  if [ "$1" = old ]; then
    sides=(old new)
    TAG[old]=_old
    TAG[new]=_new
  fi
}

# el: seconds since the batch started, as "+Ns".
el() { echo "+$(($(date +%s) - t0))s"; }

# left: seconds of the budget still usable, 10 s kept for packing.
left() { echo $((budget - ($(date +%s) - t0) - 10)); }

# step SECONDS TITLE -- CMD...: runs CMD once per side, in that side's source root,
# under timeout: SECONDS, capped by an equal share of what is left of the budget, so
# both sides run under the same cap or are both skipped. In CMD, @build@ and @bin@
# stand for the side's build and bin folders and @tag@ for its file suffix. Appends a
# titled block to $logs/$jobname.txt and "+Ns rc=N TITLE" to $S; in a comparison every
# title starts with [old] or [new].
step() {
  local want=$1 title=$2 side label rc t
  shift 3
  t=$(($(left) / ${#sides[@]}))
  [ "$want" -lt "$t" ] && t=$want
  for side in "${sides[@]}"; do
    label=$title
    [ ${#sides[@]} -gt 1 ] && label="[$side] $title"
    local b=${BUILD[$side]} tag=${TAG[$side]}
    local cmd=("${@//@build@/"$b"}")
    cmd=("${cmd[@]//@bin@/"$b/bin"}")
    cmd=("${cmd[@]//@tag@/"$tag"}")
    if [ -n "$dry" ]; then
      printf '%s\n  (cd %s) $ %s\n' "$label" "${SRC[$side]}" "${cmd[*]}"
      continue
    fi
    local log=$logs/$jobname.txt
    printf '\n=== %s\n$ %s\n' "$label" "${cmd[*]}" >>"$log"
    if [ "$t" -lt 5 ]; then
      echo "SKIPPED (time budget): $label" | tee -a "$S" >>"$log"
      continue
    fi
    (cd "${SRC[$side]}" && exec timeout -k 5 "$t" "${cmd[@]}") >>"$log" 2>&1
    rc=$? # before $(el), which would reset it
    echo "=== exit $rc" >>"$log"
    echo "$(el) rc=$rc $label" >>"$S"
  done
}

# build SIDE TARGET...: configures and builds the side (Release, sm_90, Ninja; every
# target when none is named), its log in $logs/build<tag>.log. Targets the side's
# sources lack are left out and named in $S: an older commit may predate a tool, and
# only the steps that run it fail. On failure puts the log's tail in $S and exits 1.
build() {
  local side=$1 src=${SRC[$1]} b=${BUILD[$1]}
  shift
  local log=$logs/build${TAG[$side]}.log t have want=()
  local conf=(cmake -S "$src" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_CUDA_ARCHITECTURES=90)
  if [ -n "$dry" ]; then
    printf 'build %s\n  $ %s\n  $ ninja -C %s %s\n' "$side" "${conf[*]}" "$b" "${*:-(everything)}"
    return
  fi
  # CMake refuses a build folder configured for other sources.
  if [ -f "$b/CMakeCache.txt" ] &&
    ! grep -qxF "CMAKE_HOME_DIRECTORY:INTERNAL=$src" "$b/CMakeCache.txt"; then
    echo "build $side: $b holds a build of other sources than $src" >>"$S"
    exit 1
  fi
  if "${conf[@]}" >"$log" 2>&1; then
    if [ $# -gt 0 ]; then
      have=$(ninja -C "$b" -t targets all 2>/dev/null | cut -d: -f1)
      for t in "$@"; do
        if grep -qxF "$t" <<<"$have"; then
          want+=("$t")
        else
          echo "build $side: no target $t" >>"$S"
        fi
      done
      [ ${#want[@]} -eq 0 ] && return 0
    fi
    if ninja -C "$b" "${want[@]}" >>"$log" 2>&1; then
      echo "$(el) built $side" >>"$S"
      return 0
    fi
  fi
  echo "build $side failed:" >>"$S"
  tail -40 "$log" >>"$S"
  exit 1
}

# digest LOG ERE: the lines of LOG that match ERE, each step's under its title.
digest() {
  [ -f "$1" ] || return 0
  re=$2 awk '/^=== exit /||/^\$ /{next} /^=== /{t=$0; next}
    $0 ~ ENVIRON["re"] {if (t != "") print t; t=""; print}' "$1"
}

# pack: every log (and JSON, PNG) into $out/logs.tgz.
pack() { tar czf "$out/logs.tgz" -C "$logs" .; }
