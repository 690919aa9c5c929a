#!/bin/bash
# Final device batch of a session: ctest -L gpu, NCCL comparison, issue-3 figures.
# Usage (GPU machine, repo root): OUT=dir bash bench/gpu/batch_final.sh
set -u
out=${OUT:-build/h200/out}; mkdir -p "$out"
b=build/g; B=$b/bin
export CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0
t0=$(date +%s); el() { echo "+$(( $(date +%s) - t0 ))s"; }
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$out/build.log" 2>&1 &&
  ninja -C $b >>"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
echo "build $(el)"
(cd $b && timeout ${CTEST_S:-270} ctest -L gpu -j6 --timeout 150 --output-on-failure >"$out/ctest_gpu.txt" 2>&1)
echo "ctest rc=$? $(el)"; grep -E "tests passed|\*\*\*Failed|Timeout|Exception|Not Run" "$out/ctest_gpu.txt" | head -20
timeout 60 $B/lanes_all_reduce_perf --compare nccl -g 1 --memory device -b 8 -e 256M -f 4 -J "$out/compare_g1.json" >"$out/compare_g1.txt" 2>&1
echo "compare rc=$? $(el)"
(timeout 25 $B/lanes-plot "$out/compare_g1.json" -o "$out/compare_g1.png" >"$out/plot.txt" 2>&1; echo "plot rc=$?" >>"$out/plot.txt")
{
  echo "== bound threads (staged, host)"; LANES_THREAD_FASTPATH=1 timeout 60 $B/lanes_allreduce_bound --ranks 2,4,8
  echo "== bound procs (staged, host)"; timeout 60 $B/lanes_allreduce_bound --procs --ranks 2,4,8
} >"$out/bound.txt" 2>&1
echo "bound $(el)"
{ echo "== 8 B latency, 2 processes"; timeout 30 $B/lanes-run -n 2 $B/lanes_all_reduce_perf -b 8 -e 8 -n 1000 -w 100 --memory device --bounds=0
  echo "== 8 B latency, 2 thread ranks (-g 2)"; timeout 30 $B/lanes_all_reduce_perf -g 2 -b 8 -e 8 -n 1000 -w 100 --memory device --bounds=0
  echo "== 256M P2P vs staged, 2 processes"; LANES_P2P_DISABLE=0 timeout 40 $B/lanes-run -n 2 $B/lanes_all_reduce_perf -b 64M -e 256M -f 4 --memory device -n 5 -w 2
} >"$out/latency.txt" 2>&1
echo "latency $(el)"
timeout 50 $B/lanes_overlap_gemm --m 8192 --seconds 2 >"$out/overlap.txt" 2>&1; echo "overlap rc=$? $(el)"
grep -E "time/bound|fraction|TFLOP|GB/s" "$out/bound.txt" "$out/overlap.txt" | head -20
grep -E "^ +[0-9]" "$out/latency.txt" | head; tail -3 "$out/compare_g1.txt"
