#!/bin/bash
# per-call thread switches and poll() calls of the Lanes processes, 4 namespace hosts, 1 MiB all-reduce x 1000 (+5 warm-up), out of place and in place
D=$(cd "$(dirname "$0")" && pwd)
for round in 1 2; do for v in before after; do
  if [ $v = before ]; then B=${BEFORE_BIN:?build of the commit before}; else B=${AFTER_BIN:-build/release/bin}; fi
  echo "== $v (round $round)"
  LANES_SOCKET_IFNAME=vx LANES_ROOT_ADDR=10.77.0.1:41000 perf stat -e context-switches,cpu-migrations,syscalls:sys_enter_poll,syscalls:sys_enter_recvfrom,syscalls:sys_enter_sendmsg -- \
    $B/lanes-run -n 4 $D/rank.sh $B/lanes_all_reduce_perf --memory host -c 0 -b 1M -e 1M -n 1000 -w 5 2>&1 | grep -E "^ +[0-9]|context|migrations|sys_enter|elapsed"
done; done
