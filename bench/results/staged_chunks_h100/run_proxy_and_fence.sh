#!/bin/bash
# Device call: the proxy's parts (host path alone vs the proxy), and LL's fence threshold.
set -u
t0=$(date +%s)
cmake -S . -B build/g -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/cfg.txt" 2>&1
ninja -C build/g lanes-run lanes_all_reduce_perf lanes_all_gather_perf lanes_broadcast_perf > "$OUT/build.txt" 2>&1 ||
  { tail -30 "$OUT/build.txt"; exit 1; }
echo "built in $(( $(date +%s) - t0 )) s"
export CUDA_VISIBLE_DEVICES=0
cat > /tmp/sweep3.sh <<'EOS'
B=build/g/bin
row() { grep -E '^ +[0-9]+ +[0-9]+ +float|rror'; }
for t in all_reduce all_gather broadcast; do
  echo "=== host-memory ^shared_sum $t"
  timeout 60 env LANES_ALGO=^shared_sum $B/lanes-run -n 2 $B/lanes_${t}_perf -b 8 -e 8M -f 4 -n 40 -w 5 --memory host 2>&1 | row
  echo "=== host-memory default $t"
  timeout 60 $B/lanes-run -n 2 $B/lanes_${t}_perf -b 8 -e 8M -f 4 -n 40 -w 5 --memory host 2>&1 | row
  echo "=== proxy $t"
  timeout 60 env LANES_P2P_DISABLE=1 LANES_PROTO=proxy $B/lanes-run -n 2 $B/lanes_${t}_perf -b 8 -e 8M -f 4 -n 40 -w 5 --memory device 2>&1 | row
done
for rep in 1 2; do
  for fe in 1536 0 1000000; do
    for t in broadcast all_gather all_reduce; do
      echo "=== rep$rep fence=$fe $t"
      timeout 60 env LANES_P2P_DISABLE=1 LANES_PROTO=ll LANES_EXP_FENCE=$fe $B/lanes-run -n 2 $B/lanes_${t}_perf -b 2K -e 32K -f 2 -n 200 -w 20 --memory device 2>&1 | row
    done
  done
done
EOS
timeout 400 bash bench/gpu/with_mps.sh bash /tmp/sweep3.sh > "$OUT/sweep3.txt" 2>&1
echo "sweep done at $(( $(date +%s) - t0 )) s"
