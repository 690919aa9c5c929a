#!/bin/bash
# Sweeps lanes_scale_probe over N host ranks on this machine, one lanes-run job
# per N, and prints one JSON line per N (the probe's, plus job_s: the whole
# job's wall time, launch to the last exit). docs/scale.md reads these.
#
#   bash bench/scale/run_scale.sh [N...]      # default 8 16 32 64 128 256
#   BIN=build/release/bin (default)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${BIN:-$root/build/release/bin}
[ -x "$bin/lanes_scale_probe" ] || {
  echo "run_scale.sh: no $bin/lanes_scale_probe; build it (ninja -C build/release lanes_scale_probe)" >&2
  exit 2
}
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(8 16 32 64 128 256)
# Simulated hosts (LANES_HOSTID) connect every remote rank over TCP, and the
# all-to-all every shared-memory peer: more than the usual 1024 descriptors.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
for n in "${sizes[@]}"; do
  t0=$(date +%s.%N)
  line=$("$bin/lanes-run" -n "$n" --timeout 600 "$bin/lanes_scale_probe" | grep '^{')
  t1=$(date +%s.%N)
  echo "${line%\}}, \"job_s\": $(awk "BEGIN { printf \"%.3f\", $t1 - $t0 }")}"
done
