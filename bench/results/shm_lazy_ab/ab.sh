#!/bin/bash
# Host-memory A/B of the shm rings: old = 7a1af6f (eager rings), new = main (lazy rings).
# Alternating old/new/old/new per case; the better (lower) out-of-place time per size kept.
OLD=/tmp/old-src/build/release/bin NEW=/work/main/build/release/bin
run() { # bin n tool extra-env ("-": none)
  env $([ "$4" = - ] || echo "$4") "$1/lanes-run" -n "$2" "$1/lanes_$3_perf" --memory host -b 8 -e 64M -f 8 -d float -c 0 -n 20 -w 5 2>/dev/null |
    sed -e 's/^\[[0-9]*\] //' | awk '!/^#/ && NF >= 9 { print $1, $6 }'
}
for case in "2 sendrecv -" "3 all_reduce LANES_ALGO=ring" "2 all_reduce LANES_ALGO=ring"; do
  set -- $case
  for rep in 1 2; do run $OLD $1 $2 $3 > /tmp/ab_old_$rep; run $NEW $1 $2 $3 > /tmp/ab_new_$rep; done
  echo "## $2, $1 ranks, $3 (us, best of 2; ratio old/new)"
  paste /tmp/ab_old_1 /tmp/ab_old_2 /tmp/ab_new_1 /tmp/ab_new_2 |
    awk '{o=($2<$4)?$2:$4; n=($6<$8)?$6:$8; printf "%10s %10.1f %10.1f %6.2f\n", $1, o, n, o/n}'
done
