#!/bin/bash
# The NCCL layer's cost at 8 B, where it could show: ncclAllReduce through
# libnccl.so.2 beside lanesAllReduce called directly (lanes_all_reduce_perf
# --compare nccl), five rounds each of 1 rank, 2 thread ranks (the
# shared-context path, ~18 us) and 2 processes (the proxy, ~200 us) on GPU 0;
# then 2 processes again with one library per run (--backend lanes and
# --backend nccl alternating, five each), since a --compare run keeps both
# communicators, and their proxy threads, alive in every process; and the C ABI
# programs on this machine. Results: $OUT/abi.txt, $OUT/small.txt.
#
#   OUT=dir bash bench/gpu/batch_nccl_layer_small.sh      # from the repository root
set -u
b=${BUILD_DIR:-build/g}
B=$b/bin
L=$(pwd)/$b/lib/libnccl.so.2
export NCCL_NVLS_ENABLE=0 LANES_TIMEOUT=60
cmake -S . -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null &&
  ninja -C "$b" >/dev/null || exit 1
(cd "$b" && env -u LANES_TIMEOUT ctest -R NcclAbi -LE gpu -j4 --timeout 100 2>&1 | tail -4) |
  tee "$OUT/abi.txt"
export CUDA_VISIBLE_DEVICES=0
perf() { env LANES_PERF_NCCL_LIB="$L" "$@" --compare nccl --memory device -b 8 -e 8 2>&1 | grep float; }
for round in 1 2 3 4 5; do
  echo "=== 1 rank, round $round"
  perf "$B/lanes_all_reduce_perf" -g 1 -n 5000 -w 500
  echo "=== 2 thread ranks, round $round"
  perf "$B/lanes_all_reduce_perf" -g 2 -n 5000 -w 500
  echo "=== 2 processes, round $round"
  perf "$B/lanes-run" -n 2 "$B/lanes_all_reduce_perf" -n 3000 -w 300
done 2>&1 | tee "$OUT/small.txt"
for round in 1 2 3 4 5; do
  for backend in lanes nccl; do
    echo "=== 2 processes, --backend $backend, round $round"
    env LANES_PERF_NCCL_LIB="$L" "$B/lanes-run" -n 2 "$B/lanes_all_reduce_perf" --backend $backend \
      --memory device -b 8 -e 8 -n 3000 -w 300 2>&1 | grep float
  done
done 2>&1 | tee -a "$OUT/small.txt"
