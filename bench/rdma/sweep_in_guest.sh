# shellcheck shell=sh
# Runs in the soft-RoCE guest (bench/rdma/run.sh): ib_write_bw (perftest) on
# rxe0, one way and both ways, then Lanes' all-reduce and all-gather with 2
# ranks that are separate "hosts" (LANES_HOSTID), so every byte between
# them goes through the verbs transport over the same device. All results on
# stdout, each block between "== name" lines.
export PATH="$RDMA_BENCH_BIN:$PATH"
gid=1
sizes="1048576 4194304 16777216 67108864"
# bw NAME ARGS...: an ib_write_bw server and client pair for each size.
bw() {
  name=$1
  shift
  echo "== ib_write_bw $name"
  for s in $sizes; do
    timeout 120 ib_write_bw -d rxe0 -x $gid -F -s "$s" -n 20 --report_gbits "$@" >/tmp/srv.log 2>&1 &
    srv=$!
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      sleep 1
      timeout 120 ib_write_bw -d rxe0 -x $gid -F -s "$s" -n 20 --report_gbits "$@" 10.77.0.1 \
        >/tmp/cli.log 2>&1 && break
      grep -q "Couldn't connect\|Unable to" /tmp/cli.log || break
    done
    wait $srv
    grep -E "^ *$s " /tmp/cli.log || { echo "ib_write_bw $s failed:"; cat /tmp/cli.log; }
  done
}
bw one-way
bw both-ways --bidirectional
for coll in all_reduce all_gather; do
  echo "== lanes_${coll}_perf 2 ranks over ib"
  LANES_DEBUG=INFO LANES_DEBUG_SUBSYS=TRANSPORT lanes-run -np 2 -- sh -c \
    "LANES_HOSTID=guest-host-\$LANES_RANK exec lanes_${coll}_perf --memory host -b 1M -e 64M -f 4 -n 10 -w 3" \
    2>&1 | grep -v "^ *$"
done
