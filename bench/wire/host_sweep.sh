#!/bin/bash
# LANES_WIRE on host buffers: float32 all-reduce on the ring, each wire format
# against the native one, side by side in one run, over shared memory and over
# TCP (LANES_SHM_DISABLE=1: the socket transport, loopback here).
#
#   bash bench/wire/host_sweep.sh [BUILD] [OUT] [RANKS...]    # defaults build/release, bench/results/wire_host, 2 3
#
# Writes OUT/<transport>_<ranks>ranks_<format>.json (the perf tool's) and OUT/summary.md:
# per transport, rank count and size, each format's time and its speed-up over native.
# The perf tool's check is off (-c 0): compressed results differ from the exact sum
# within docs/wire_formats.md's bound, which tests/unit/test_wire_formats.cc checks.
set -eu
build=${1:-build/release}
out=${2:-bench/results/wire_host}
shift $(($# < 2 ? $# : 2))
ranks=("${@:-2 3}")
read -r -a ranks <<<"${ranks[*]}"
mkdir -p "$out"
for t in shm tcp; do
  for n in "${ranks[@]}"; do
    for w in native bf16 fp8; do
      env LANES_WIRE=$w LANES_ALGO=ring $([ $t = tcp ] && echo LANES_SHM_DISABLE=1) \
        "$build/bin/lanes-run" -n "$n" "$build/bin/lanes_all_reduce_perf" -b 1M -e 256M -f 4 \
        -n 8 -w 2 -c 0 -J "$out/${t}_${n}ranks_${w}.json" >/dev/null
    done
  done
done
python3 - "$out" "${ranks[@]}" <<'PY'
import json, sys
out, ranks = sys.argv[1], sys.argv[2:]
lines = ["# LANES_WIRE, float32 all-reduce on the ring, host buffers",
         "",
         "Out-of-place time per call (us); x: speed-up over native in the same run.",
         "",
         "| transport | ranks | size | native | bf16 | x | fp8 | x |",
         "|---|---|---|---|---|---|---|---|"]
for t in ("shm", "tcp"):
    for n in ranks:
        runs = {w: {r["size"]: r["out_of_place"]["time"] for r in json.load(open(f"{out}/{t}_{n}ranks_{w}.json"))["results"]}
                for w in ("native", "bf16", "fp8")}
        for size, base in sorted(runs["native"].items()):
            b, f = runs["bf16"][size], runs["fp8"][size]
            lines.append(f"| {t} | {n} | {size >> 20} MiB | {base:.0f} | {b:.0f} | {base / b:.2f} | {f:.0f} | {base / f:.2f} |")
open(f"{out}/summary.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
