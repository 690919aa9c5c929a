#!/bin/bash
# Device call: CPU enqueue time against wall time of the staged path at two chunk floors.
set -u
t0=$(date +%s)
cmake -S . -B build/g -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/cfg.txt" 2>&1
ninja -C build/g lanes-run lanes_all_reduce_perf lanes_all_gather_perf lanes_broadcast_perf > "$OUT/build.txt" 2>&1 ||
  { tail -30 "$OUT/build.txt"; exit 1; }
echo "built in $(( $(date +%s) - t0 )) s"
export CUDA_VISIBLE_DEVICES=0
cat > /tmp/sweep2.sh <<'EOS'
B=build/g/bin
for rep in 1 2; do
for f in 4194304 262144; do
  for t in all_reduce all_gather broadcast; do
    for C in 0 1; do
      echo "=== rep$rep floor=$f C=$C $t"
      timeout 60 env LANES_P2P_DISABLE=1 LANES_PROTO=staged LANES_EXP_FLOOR=$f $B/lanes-run -n 2 $B/lanes_${t}_perf \
        -b 256K -e 16M -f 4 -n 40 -w 5 -C $C --memory device 2>&1 | grep -E '^ +[0-9]+ +[0-9]+ +float|rror'
    done
  done
done
done
echo "=== one process, 1 rank: CPU time of a staged-free call for reference"
EOS
timeout 300 bash bench/gpu/with_mps.sh bash /tmp/sweep2.sh > "$OUT/sweep2.txt" 2>&1
echo "sweep done at $(( $(date +%s) - t0 )) s"
