#!/bin/bash
# Device call: issue 20's five collectives from 2 KiB (so that 8 KiB is not a sweep's first size), plans in JSON.
set -u
t0=$(date +%s)
cmake -S . -B build/g -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/cfg.txt" 2>&1
ninja -C build/g lanes-run lanes_all_reduce_perf lanes_all_gather_perf lanes_reduce_scatter_perf lanes_broadcast_perf \
  lanes_sendrecv_perf > "$OUT/build.txt" 2>&1 || { tail -30 "$OUT/build.txt"; exit 1; }
echo "built in $(( $(date +%s) - t0 )) s"
export CUDA_VISIBLE_DEVICES=0
cat > /tmp/t5.sh <<'EOS'
B=build/g/bin
for t in all_reduce all_gather reduce_scatter broadcast sendrecv; do
  echo "=== $t, 2 processes under MPS, P2P off, from 2 KiB"
  timeout 30 env LANES_P2P_DISABLE=1 $B/lanes-run -n 2 $B/lanes_${t}_perf -b 2K -e 2M -f 2 -n 100 -w 10 \
    --memory device -J "$OUT/${t}.json" 2>&1 | grep -E '^ +[0-9]+ +[0-9]+ +float|rror'
done
EOS
timeout 150 bash bench/gpu/with_mps.sh bash /tmp/t5.sh > "$OUT/table_from_2k.txt" 2>&1
cut -c1-110 "$OUT/table_from_2k.txt"
echo "done at $(( $(date +%s) - t0 )) s"
