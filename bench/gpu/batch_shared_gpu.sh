#!/bin/bash
# Short device batch: processes sharing one GPU (small all-reduces take the proxy,
# LL refused) and the forking GPU tests, with the reason P2P was not used printed.
#   OUT=dir bash bench/gpu/batch_shared_gpu.sh        # from the repository root
set -u
out=${OUT:-build/shared/out}
mkdir -p "$out"
b=${BUILD_DIR:-build/g}
B=$b/bin
export CUDA_VISIBLE_DEVICES=0 CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_NVLS_ENABLE=0 LANES_TIMEOUT=30
t0=$(date +%s)
el() { echo "+$(($(date +%s) - t0))s"; }
{ cmake -S . -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 &&
  ninja -C "$b" lanes_gpu_tests lanes_all_reduce_perf lanes-run; } >"$out/build.log" 2>&1 ||
  { tail -30 "$out/build.log"; exit 1; }
echo "build $(el)"
P=$B/lanes_all_reduce_perf
{
  echo "== 2 processes on GPU 0, default (proxy up to 256 KiB, staged above)"
  timeout 30 "$B/lanes-run" -n 2 "$P" -b 8 -e 64M -f 8 -n 20 -w 5 --memory device --bounds=0
  echo "== the same, LANES_SHARED_GPU_PROXY_BYTES=0 (staged at every size)"
  LANES_SHARED_GPU_PROXY_BYTES=0 timeout 40 "$B/lanes-run" -n 2 "$P" -b 8 -e 64M -f 8 -n 20 -w 5 --memory device --bounds=0
} >"$out/latency.txt" 2>&1
echo "perf $(el)"
(cd "$b" && LANES_DEBUG=INFO LANES_DEBUG_SUBSYS=INIT timeout ${CTEST_S:-100} ctest -L gpu -j4 --timeout 60 \
  -R "StagedAllReduceProcesses|LlProcesses|DeviceSingleRank|DeviceMatrix.Procs" \
  --output-on-failure >"$out/ctest.txt" 2>&1)
echo "ctest rc=$? $(el)"
grep -E "Test +#|tests passed" "$out/ctest.txt" | cut -c1-140
grep -hE "^==|^\[0\] +[0-9]" "$out/latency.txt" | cut -c1-120
