#!/bin/bash
# Device call: GPU tests of LL, the simple kernel and the device matrix; issue 20's table.
set -u
t0=$(date +%s)
cmake -S . -B build/g -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/cfg.txt" 2>&1
ninja -C build/g lanes-run lanes-topo lanes_gpu_tests lanes_gpu_kernel_tests lanes_all_reduce_perf lanes_all_gather_perf \
  lanes_reduce_scatter_perf lanes_broadcast_perf lanes_sendrecv_perf > "$OUT/build.txt" 2>&1 ||
  { tail -30 "$OUT/build.txt"; exit 1; }
echo "built in $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=name,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader
export CUDA_VISIBLE_DEVICES=0
timeout 260 env -u LANES_TIMEOUT ctest --test-dir build/g -R "^LlProcesses|^LlTest|^DeviceMatrix|^SimpleProcesses|^Kernels" \
  -j4 --timeout 200 --output-on-failure > "$OUT/ctest_ll_simple.txt" 2>&1
grep -E "tests passed|Failed|Timeout|Not Run" "$OUT/ctest_ll_simple.txt" | tail -8
echo "tests done at $(( $(date +%s) - t0 )) s"
cat > /tmp/table.sh <<'EOS'
B=build/g/bin
for rep in 1 2; do
for t in all_reduce all_gather reduce_scatter broadcast sendrecv; do
  echo "=== rep$rep $t, 2 processes under MPS, P2P off"
  timeout 40 env LANES_P2P_DISABLE=1 $B/lanes-run -n 2 $B/lanes_${t}_perf \
    -b 8K -e 2M -f 4 -n 100 -w 10 --memory device 2>&1 | grep -E '^ +[0-9]+ +[0-9]+ +float|rror'
done
done
echo "=== broadcast 2K-512K, LL and simple prices"
timeout 40 env LANES_P2P_DISABLE=1 $B/lanes-run -n 2 $B/lanes_broadcast_perf -b 2K -e 512K -f 2 -n 200 -w 20 --memory device 2>&1 | grep -E '^ +[0-9]+ +[0-9]+ +float|rror'
EOS
timeout 200 bash bench/gpu/with_mps.sh bash /tmp/table.sh > "$OUT/table.txt" 2>&1
cat "$OUT/table.txt" | cut -c1-110
echo "done at $(( $(date +%s) - t0 )) s"
