#!/bin/bash
# One device batch for issue 3: build, ctest -L gpu, staged-vs-bound, latency, overlap.
# Usage (GPU machine, repo root): OUT=dir bash bench/gpu/batch_issue3.sh
set -u
out=${OUT:-build/h200/out}; mkdir -p "$out"
b=build/g
export CUDA_DEVICE_MAX_CONNECTIONS=32
t0=$(date +%s)
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$out/build.log" 2>&1 &&
  ninja -C $b lanes_gpu_tests lanes_gpu_kernel_tests lanes_allreduce_bound lanes_all_reduce_perf \
    lanes-run lanes_overlap_gemm ${EXTRA_TARGETS:-} >>"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
(cd $b && timeout ${CTEST_S:-300} ctest -L gpu -j10 --timeout 120 --output-on-failure >"$out/ctest_gpu.txt" 2>&1)
echo "ctest rc=$? at $(( $(date +%s) - t0 )) s"; grep -E "tests passed|\*\*\*Failed|Timeout|Exception" "$out/ctest_gpu.txt" | head -30
B=$b/bin
{
  echo "== latency 8 B, 2 thread ranks (-g 2)"; timeout 40 $B/lanes_all_reduce_perf -g 2 -b 8 -e 8 -n 1000 -w 100 --memory device --bounds=0
  echo "== latency 8 B, 2 processes"; timeout 40 $B/lanes-run -n 2 $B/lanes_all_reduce_perf -b 8 -e 8 -n 1000 -w 100 --memory device --bounds=0
} >"$out/latency.txt" 2>&1
grep -vE "^#|^$" "$out/latency.txt" | grep -E "^ +8|==|rror" | head
{
  echo "== bound threads"; timeout 90 $B/lanes_allreduce_bound --ranks 2,4,8
  echo "== bound procs"; timeout 90 $B/lanes_allreduce_bound --procs --ranks 2,4,8
} >"$out/bound.txt" 2>&1
grep -E "ranks|ratio|bound|rror" "$out/bound.txt" | head -30
echo "== overlap"; timeout 60 $B/lanes_overlap_gemm --m 8192 --seconds 2 >"$out/overlap.txt" 2>&1; echo "overlap rc=$?"; tail -15 "$out/overlap.txt"
echo "total $(( $(date +%s) - t0 )) s"
