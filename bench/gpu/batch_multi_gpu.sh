#!/bin/bash
# Issue 7 in one batch on a machine with several GPUs of one host (2, 4 or 8):
#   5. lanes-topo --probe (and nvidia-smi topo -m);
#   2. five perf tools, Lanes vs NCCL, P2P off on both sides (PCIe-only, as on a GeForce box);
#   3. the same with P2P allowed on both sides (INFO says which transport Lanes chose);
#   4. cuBLAS GEMM on every GPU beside 256 MiB all-reduces, Lanes and NCCL;
#   1. ctest -L gpu with one rank per GPU (LANES_TEST_SPREAD_GPUS=1).
# Every step runs under `timeout`, capped by what is left of RUN_BUDGET_S (default 560 s).
# Results: $OUT/summary.txt and $OUT/multi_gpu_<n>gpu.tgz (text, JSON, PNG), which
# unpacks into bench/results/multi_gpu_<n>gpu/.
#
# In session 4 one 540 s call did not hold it all (each tool takes 50-70 s to 1 GiB on
# 2 GPUs): PART=1 runs 5 and 2, PART=2 runs 3, 4 and 1; unset runs everything.
#
#   OUT=dir PART=1 bash bench/gpu/batch_multi_gpu.sh   # from the repository root
set -u
n=$(nvidia-smi -L | wc -l)
name=multi_gpu_${n}gpu
. "$(dirname "$0")/batch_lib.sh" # batch_init, build, el
batch_init build/multi/out 560
res=$logs/$name # unpacks into bench/results/$name
mkdir -p "$res"
pack() { tar czf "$out/$name.tgz" -C "$logs" "$name"; }
left() { echo $((budget - ($(date +%s) - t0) - 10)); }
# capped SECONDS: min(SECONDS, time left).
capped() {
  local l
  l=$(left)
  echo $(($1 < l ? $1 : l))
}

nvidia-smi -L >"$S" 2>&1
build
mv "$logs/build.log" "$res/"
echo "build $(el), $n GPUs" >>"$S"

part=${PART:-all}
modes=(p2p_off p2p_on)
[ "$part" = 1 ] && modes=(p2p_off)
[ "$part" = 2 ] && modes=(p2p_on)

# 5. The box.
[ "$part" != 2 ] && {
  nvidia-smi topo -m
  echo
  timeout 60 "$B/lanes-topo" --probe
} >"$res/topo.txt" 2>&1

# 2 and 3. Lanes vs NCCL, one process per GPU, 8 B to 1 GiB.
for mode in "${modes[@]}"; do
  if [ $mode = p2p_off ]; then
    envs=(LANES_P2P_DISABLE=1 NCCL_P2P_DISABLE=1)
  else
    envs=(LANES_DEBUG=INFO LANES_DEBUG_SUBSYS=INIT)
  fi
  for tool in all_reduce all_gather reduce_scatter broadcast sendrecv; do
    t=$(capped "${TOOL_S:-100}")
    [ "$t" -lt 5 ] && { echo "SKIPPED (time budget): $tool $mode" >>"$S"; continue; }
    env "${envs[@]}" timeout -k 5 "$t" "$B/lanes-run" -n "$n" "$B/lanes_${tool}_perf" \
      --compare nccl --memory device -b 8 -e 1G -f 4 -n 10 -w 3 \
      -J "$res/${tool}_${mode}.json" >"$res/${tool}_${mode}.txt" 2>&1
    rc=$? # before $(el), which would reset it
    echo "$(el) rc=$rc $tool $mode" >>"$S"
    timeout 20 "$B/lanes-plot" "$res/${tool}_${mode}.json" -o "$res/${tool}_${mode}.png" \
      --title "${tool} ${n}xGPU ${mode}" >/dev/null 2>&1
  done
done

[ "$part" = 1 ] && {
  pack
  cat "$S"
  exit 0
}

# 4. GEMM on every GPU beside 256 MiB all-reduces, Lanes then NCCL, P2P off and allowed.
for mode in p2p_off p2p_on; do
  envs=(LANES_THREAD_FASTPATH=1 LANES_P2P_DISABLE=0)
  [ $mode = p2p_off ] && envs=(LANES_THREAD_FASTPATH=1 LANES_P2P_DISABLE=1 NCCL_P2P_DISABLE=1)
  t=$(capped 60)
  [ "$t" -lt 5 ] && { echo "SKIPPED (time budget): overlap $mode" >>"$S"; continue; }
  env "${envs[@]}" timeout -k 5 "$t" "$B/lanes_overlap_gemm" --gpus "$n" --compare nccl \
    --m 8192 --seconds 2 >"$res/overlap_${mode}.txt" 2>&1
  rc=$?
  echo "$(el) rc=$rc overlap $mode" >>"$S"
done

# 1. The GPU tests with several ranks, one rank per GPU (the kernel tests run on one GPU
# and ran in the one-GPU batch).
t=$(capped 400)
(cd "$b" && LANES_TEST_SPREAD_GPUS=1 timeout -k 5 "$t" ctest -L gpu -j6 --timeout 200 \
  -R "${CTEST_R:-DeviceMatrix|DeviceStreams|DeviceErrors|DeviceSingleRank|Staged|Ll}" \
  --output-on-failure >"$res/ctest_gpu.txt" 2>&1)
rc=$?
echo "$(el) rc=$rc ctest" >>"$S"
pack
{
  grep -hE "tests passed|\*\*\*Failed|Timeout" "$res/ctest_gpu.txt" | head -20
  grep -hE "fraction|covered" "$res"/overlap_*.txt
} >>"$S" 2>&1
cat "$S"
