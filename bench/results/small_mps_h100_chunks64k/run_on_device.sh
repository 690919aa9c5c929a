#!/bin/bash
# The call that made this folder (run from the repository root): GPU tests of the simple kernel with 64 KiB chunks,
# then issue 20's table (2 processes under MPS, P2P off).
set -u
cd "$(dirname "$0")"
t0=$(date +%s)
cmake -S . -B build/g -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/cfg.txt" 2>&1
ninja -C build/g lanes-run lanes-topo lanes_gpu_tests lanes_all_reduce_perf lanes_all_gather_perf \
  lanes_reduce_scatter_perf lanes_broadcast_perf lanes_sendrecv_perf > "$OUT/build.txt" 2>&1 ||
  { tail -30 "$OUT/build.txt"; exit 1; }
echo "built in $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=name,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader
export CUDA_VISIBLE_DEVICES=0
timeout 120 env -u LANES_TIMEOUT ctest --test-dir build/g -R "^SimpleProcesses\.|FirstUse" -j4 --timeout 110 \
  --output-on-failure > "$OUT/ctest_simple.txt" 2>&1
grep -E "tests passed|Failed|Timeout|Test +#" "$OUT/ctest_simple.txt"
echo "tests done at $(( $(date +%s) - t0 )) s"
B=build/g/bin
for t in all_reduce all_gather reduce_scatter broadcast sendrecv; do
  echo "=== $t, 2 processes under MPS, P2P off"
  timeout 40 bash bench/gpu/with_mps.sh env LANES_P2P_DISABLE=1 $B/lanes-run -n 2 $B/lanes_${t}_perf \
    -b 8K -e 2M -f 4 -n 100 -w 10 --memory device 2>&1 | grep -E '^ +[0-9]+ +[0-9]+ +float|rror'
done > "$OUT/small_mps_p2p_off.txt" 2>&1
cat "$OUT/small_mps_p2p_off.txt"
echo "done at $(( $(date +%s) - t0 )) s"
