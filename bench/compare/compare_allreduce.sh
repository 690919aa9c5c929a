#!/usr/bin/env bash
# Lanes vs Open MPI all-reduce (float sum, host memory), measured side by side
# on this machine: for each rank count, two sweeps of each tool alternating
# (Lanes, MPI, Lanes, MPI); per size the better of the two runs is kept.
# Prints a markdown table; ratio = MPI time / Lanes time (> 1: Lanes faster).
#
# usage: compare_allreduce.sh [BIN_DIR]   (default: the folder this script is in,
#        i.e. build/<preset>/bin, holding lanes-run, lanes_all_reduce_perf,
#        mpi_allreduce_perf)
# env:   RANKS="2 4"  MAXBYTES=64M  ITERS=20  WARMUP=5
set -euo pipefail

bin=${1:-$(cd "$(dirname "$0")" && pwd)}
ranks=${RANKS:-"2 4"}
maxbytes=${MAXBYTES:-64M}
iters=${ITERS:-20}
warmup=${WARMUP:-5}
cores=$(nproc)
for tool in lanes-run lanes_all_reduce_perf mpi_allreduce_perf; do
  [[ -x "$bin/$tool" ]] || { echo "compare_allreduce.sh: $bin/$tool not found; build it first" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# size, out-of-place time (us), out-of-place busbw: data rows only, launcher prefix removed.
rows() { sed -e 's/^\[[0-9]*\] //' "$1" | awk '!/^#/ && NF >= 9 { print $1, $6, $8 }'; }

run_lanes() {
  "$bin/lanes-run" -n "$1" "$bin/lanes_all_reduce_perf" --memory host -b 8 -e "$maxbytes" -f 4 \
    -d float -o sum -c 0 -n "$iters" -w "$warmup" > "$2"
}
run_mpi() {
  mpirun --allow-run-as-root --oversubscribe -np "$1" "$bin/mpi_allreduce_perf" -b 8 \
    -e "$maxbytes" -f 4 -n "$iters" -w "$warmup" > "$2"
}

echo "# Lanes vs Open MPI all-reduce, float sum, host memory"
echo
echo "Machine: $cores cores. Each tool ran two whole sweeps, alternating; best time per size kept."
echo "ratio = MPI time / Lanes time (above 1: Lanes is faster). busbw = algbw * 2(n-1)/n."
for n in $ranks; do
  note=""
  if (( n > cores )); then
    # More ranks than cores: busy-polling ranks starve each other. Open MPI
    # yields when idle with this; Lanes' waits back off to sleeping by design.
    export OMPI_MCA_mpi_yield_when_idle=1
    note=" (more ranks than cores: OMPI_MCA_mpi_yield_when_idle=1 set for fairness)"
  else
    unset OMPI_MCA_mpi_yield_when_idle
  fi
  for round in 1 2; do
    run_lanes "$n" "$tmp/lanes.$n.$round"
    run_mpi "$n" "$tmp/mpi.$n.$round"
  done
  echo
  echo "## $n ranks$note"
  echo
  echo "| ranks | size (B) | Lanes µs | MPI µs | ratio | Lanes busbw GB/s | MPI busbw GB/s |"
  echo "|---:|---:|---:|---:|---:|---:|---:|"
  # Best (lowest) time per size for each tool, joined on size.
  best() { cat "$@" | awk '{ if (!($1 in t) || $2 < t[$1]) { t[$1] = $2; b[$1] = $3 } }
                          END { for (s in t) print s, t[s], b[s] }' | sort -n; }
  best <(rows "$tmp/lanes.$n.1") <(rows "$tmp/lanes.$n.2") > "$tmp/lanes.best"
  best <(rows "$tmp/mpi.$n.1") <(rows "$tmp/mpi.$n.2") > "$tmp/mpi.best"
  join "$tmp/lanes.best" "$tmp/mpi.best" | sort -n | awk -v n="$n" \
    '{ printf "| %d | %d | %.2f | %.2f | %.2f | %.3f | %.3f |\n", n, $1, $2, $4, $4 / $2, $3, $5 }'
done
