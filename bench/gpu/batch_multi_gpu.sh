#!/bin/bash
# Issue 7 in one batch on a machine with several GPUs of one host (2, 4 or 8):
#   1. ctest -L gpu with one rank per GPU (LANES_TEST_SPREAD_GPUS=1);
#   2. five perf tools, Lanes vs NCCL, P2P off on both sides (PCIe-only, as on a GeForce box);
#   3. the same with P2P allowed on both sides (INFO says which transport Lanes chose);
#   5. lanes-topo --probe.
# Results land under $OUT (default bench/results/multi_gpu_<n>gpu): text, JSON, PNG.
# Run 4 (GEMM overlap on every GPU, Lanes vs NCCL) has no tool yet: lanes_overlap_gemm
# runs Lanes thread ranks on one GPU only.
#
#   OUT=dir bash bench/gpu/batch_multi_gpu.sh        # from the repository root
set -u
n=$(nvidia-smi -L | wc -l)
out=${OUT:-bench/results/multi_gpu_${n}gpu}
mkdir -p "$out"
out=$(cd "$out" && pwd)
b=${BUILD_DIR:-build/g}
B=$b/bin
export NCCL_NVLS_ENABLE=0 CUDA_DEVICE_MAX_CONNECTIONS=32
t0=$(date +%s)
el() { echo "+$(($(date +%s) - t0))s"; }

cmake -S . -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$out/build.log" 2>&1 &&
  ninja -C "$b" >>"$out/build.log" 2>&1 || {
  tail -40 "$out/build.log"
  exit 1
}
echo "build $(el), $n GPUs"

# 5. The box.
{
  nvidia-smi topo -m
  echo
  "$B/lanes-topo" --probe
} >"$out/topo.txt" 2>&1

# 2 and 3. Lanes vs NCCL, one process per GPU, 8 B to 1 GiB.
for mode in p2p_off p2p_on; do
  if [ $mode = p2p_off ]; then
    envs=(LANES_P2P_DISABLE=1 NCCL_P2P_DISABLE=1)
  else
    envs=(LANES_DEBUG=INFO LANES_DEBUG_SUBSYS=INIT)
  fi
  for tool in all_reduce all_gather reduce_scatter broadcast sendrecv; do
    env "${envs[@]}" timeout ${TOOL_S:-150} "$B/lanes-run" -n "$n" "$B/lanes_${tool}_perf" \
      --compare nccl --memory device -b 8 -e 1G -f 4 -n 10 -w 3 \
      -J "$out/${tool}_${mode}.json" >"$out/${tool}_${mode}.txt" 2>&1
    echo "$tool $mode rc=$? $(el)"
    "$B/lanes-plot" "$out/${tool}_${mode}.json" -o "$out/${tool}_${mode}.png" \
      --title "${tool} ${n}xGPU ${mode}" >/dev/null 2>&1
  done
done

# 1. The GPU tests, one rank per GPU.
(cd "$b" && LANES_TEST_SPREAD_GPUS=1 timeout ${CTEST_S:-400} ctest -L gpu -j4 --timeout 150 \
  --output-on-failure >"$out/ctest_gpu.txt" 2>&1)
echo "ctest rc=$? $(el)"
grep -E "tests passed|\*\*\*Failed|Timeout" "$out/ctest_gpu.txt" | head -20
