#!/bin/bash
# The NCCL drop-in (libnccl.so.2) on the GPU machine, in one call:
#   1. the build, then every GPU test (PyTorch through the layer on 2 and 4
#      processes of GPU 0 included) and the C ABI programs;
#   2. ncclAllReduce through the layer beside lanesAllReduce called directly, on
#      the same path, 2 processes on GPU 0, 8 B and 256 MiB, three rounds each
#      (lanes_all_reduce_perf --compare nccl with LANES_PERF_NCCL_LIB = the layer);
#   3. torch.distributed.all_reduce through the layer at those sizes;
# Results: $OUT/summary.txt and $OUT/nccl_layer.tgz (every log).
#
#   OUT=dir bash bench/gpu/batch_nccl_layer.sh      # from the repository root
set -u
. "$(dirname "$0")/batch_lib.sh" # batch_init, build, el, step
batch_init build/nccl_layer/out 580
pack() { tar czf "$out/nccl_layer.tgz" -C "$logs" .; }

nvidia-smi --query-gpu=index,name,driver_version --format=csv >"$S" 2>&1
build
echo "build $(el)" >>"$S"
export CUDA_VISIBLE_DEVICES=0
L=$(pwd)/$b/lib/libnccl.so.2

step 420 ctest_gpu.txt "ctest -L gpu (every GPU test, PyTorch through the layer included)" -- \
  env -u LANES_TIMEOUT ctest --test-dir "$b" -L gpu -j6 --timeout 400 --output-on-failure
step 60 ctest_abi.txt "ctest -R NcclAbi -LE gpu (the C ABI programs)" -- env -u LANES_TIMEOUT \
  ctest --test-dir "$b" -R NcclAbi -LE gpu -j8 --timeout 50 --output-on-failure
for round in 1 2 3; do
  step 40 layer.txt "8 B, 2 processes, round $round" -- env LANES_PERF_NCCL_LIB="$L" \
    "$B/lanes-run" -n 2 "$B/lanes_all_reduce_perf" --compare nccl --memory device \
    -b 8 -e 8 -n 2000 -w 200
  step 60 layer.txt "256 MiB, 2 processes, round $round" -- env LANES_PERF_NCCL_LIB="$L" \
    "$B/lanes-run" -n 2 "$B/lanes_all_reduce_perf" --compare nccl --memory device \
    -b 256M -e 256M -n 20 -w 5
done
step 120 torch.txt "torch.distributed.all_reduce through the layer, 2 processes" -- \
  python3 bench/compat/torch_allreduce.py --lib "$L" --nprocs 2 --sizes 8,268435456

pack
{
  grep -hE "tests passed|Total Test" "$logs"/ctest_*.txt
  grep -h "\*\*\*Failed\|Timeout\|Not Run\|\*\*\*Skipped" "$logs"/ctest_*.txt
  [ -f "$logs/layer.txt" ] && grep -hE '^=== [0-9]|float' "$logs/layer.txt"
  [ -f "$logs/torch.txt" ] && grep -h "torch all_reduce" "$logs/torch.txt"
} >>"$S" 2>&1
