#!/bin/bash
# Device call: build, the GPU tests last session's code never ran, and the staged chunk sweep.
set -u
t0=$(date +%s)
cmake -S . -B build/g -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/cfg.txt" 2>&1
ninja -C build/g lanes-run lanes-topo lanes_gpu_tests lanes_topology_gpu_tests lanes_all_reduce_perf lanes_all_gather_perf \
  lanes_reduce_scatter_perf lanes_broadcast_perf lanes_sendrecv_perf > "$OUT/build.txt" 2>&1 ||
  { tail -30 "$OUT/build.txt"; exit 1; }
echo "built in $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=name,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader
export CUDA_VISIBLE_DEVICES=0
timeout 170 env -u LANES_TIMEOUT ctest --test-dir build/g -R "BoundedWait|FirstUseProbeGpu|TopoProbeGpu" -j3 --timeout 160 \
  --output-on-failure > "$OUT/ctest_probe.txt" 2>&1
grep -E "tests passed|Failed|Timeout|Test +#" "$OUT/ctest_probe.txt"
echo "tests done at $(( $(date +%s) - t0 )) s"
cat > /tmp/sweep.sh <<'EOS'
B=build/g/bin
run() { # label env...
  local label=$1; shift
  for t in all_reduce all_gather reduce_scatter broadcast; do
    echo "=== $label $t"
    timeout 60 env LANES_P2P_DISABLE=1 "$@" $B/lanes-run -n 2 $B/lanes_${t}_perf \
      -b 256K -e 16M -f 2 -n 40 -w 5 --memory device 2>&1 | grep -E '^ +[0-9]+ +[0-9]+ +float|rror'
  done
}
for rep in 1 2; do
  for f in 4194304 1048576 524288 262144; do
    run "rep$rep staged floor=$f" LANES_PROTO=staged LANES_EXP_FLOOR=$f
  done
done
for f in 4194304 1048576 524288; do
  run "default floor=$f" LANES_EXP_FLOOR=$f
done
for pr in ll simple default; do
  echo "=== bcast8k proto=$pr"
  e=(); [ $pr = default ] || e=(LANES_PROTO=$pr)
  timeout 60 env LANES_P2P_DISABLE=1 LANES_DEBUG=INFO LANES_DEBUG_SUBSYS=PLAN "${e[@]}" $B/lanes-run -n 2 $B/lanes_broadcast_perf \
    -b 8K -e 32K -f 2 -n 200 -w 20 --memory device 2>&1 | grep -E '^ +[0-9]+ +[0-9]+ +float|rror|8 KiB|16 KiB|32 KiB|PLAN' | head -30
done
run "staged floor=512K parts=4" LANES_PROTO=staged LANES_EXP_FLOOR=524288 LANES_EXP_PARTS=4
EOS
timeout 380 bash bench/gpu/with_mps.sh bash /tmp/sweep.sh > "$OUT/sweep.txt" 2>&1
echo "sweep done at $(( $(date +%s) - t0 )) s"
grep -c float "$OUT/sweep.txt"
