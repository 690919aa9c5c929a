#!/bin/bash
# Session 5's last device batch, on a machine with 2+ GPUs (nvidia-h200-x2):
#   1. the GPU tests of the staged send/recv and of everything its routing touches
#      (ranks on GPU 0);
#   2. lanes_sendrecv_perf vs NCCL on 2 GPUs, P2P off and allowed, now that send/recv
#      take the pair slots (issue 7, run 2 and 3);
#   3. the 1 GiB rows of the five perf tools, both modes (-b 8 -f 4 never reaches 1 GiB);
#   4. the P2P-on overlap run that hung in PART=2, with line-buffered output and INFO;
#   5. the LL kernel up to 256 KiB on 2 GPUs (where the staged path costs ~50 us);
#   6. 4 and 8 thread ranks on GPU 0 each in a fresh process (the 1.30x / 1.44x of
#      the one-GPU batch came from one process that ran 2, 4, 8 in turn).
# Results: $OUT/summary.txt and $OUT/followup.tgz (every log, JSON, PNG).
#
#   OUT=dir bash bench/gpu/batch_followup.sh      # from the repository root
set -u
. "$(dirname "$0")/batch_lib.sh" # batch_init, build, el, step
batch_init build/followup/out 540
n=$(nvidia-smi -L | wc -l)
pack() { tar czf "$out/followup.tgz" -C "$logs" .; }

nvidia-smi -L >"$S" 2>&1
build
echo "build $(el), $n GPUs" >>"$S"

# 1.
step 150 ctest_gpu.txt "ctest: staged send/recv and neighbours, GPU 0" -- env -u LANES_TIMEOUT \
  CUDA_VISIBLE_DEVICES=0 ctest --test-dir "$b" -L gpu -j6 --timeout 120 --output-on-failure \
  -R "StagedSendRecv|DeviceMatrix.Procs|Staged.*Processes|DeviceErrors|DeviceStreams|LlProcesses"

# 2 and 3. One process per GPU.
perf() { # TOOL MODE TAG ARGS...
  local tool=$1 mode=$2 tag=$3
  shift 3
  local envs=(LANES_P2P_DISABLE=1 NCCL_P2P_DISABLE=1)
  [ "$mode" = p2p_on ] && envs=(LANES_DEBUG=INFO LANES_DEBUG_SUBSYS=INIT)
  step 70 "${tool}_${mode}${tag}.txt" "$tool $mode $*" -- env "${envs[@]}" "$B/lanes-run" -n "$n" \
    "$B/lanes_${tool}_perf" --compare nccl --memory device -J "$logs/${tool}_${mode}${tag}.json" "$@"
  timeout 20 "$B/lanes-plot" "$logs/${tool}_${mode}${tag}.json" -o "$logs/${tool}_${mode}${tag}.png" \
    --title "${tool} ${n}xGPU ${mode}${tag}" >/dev/null 2>&1
}
for mode in p2p_off p2p_on; do perf sendrecv $mode "" -b 8 -e 1G -f 4 -n 10 -w 3; done
for mode in p2p_off p2p_on; do
  for tool in sendrecv all_reduce all_gather reduce_scatter broadcast; do
    perf $tool $mode _1G -b 1G -e 1G -n 5 -w 2
  done
done

# 4.
step 75 overlap_p2p_on.txt "GEMM overlap, P2P allowed" -- env LANES_THREAD_FASTPATH=1 \
  LANES_P2P_DISABLE=0 LANES_TIMEOUT=20 LANES_DEBUG=INFO LANES_DEBUG_SUBSYS=INIT \
  stdbuf -oL -eL "$B/lanes_overlap_gemm" --gpus "$n" --compare nccl --m 8192 --seconds 2

# 5.
step 40 ll_sweep.txt "all_reduce, LANES_LL_MAX_BYTES=256K, P2P off" -- env LANES_LL_MAX_BYTES=256K \
  LANES_P2P_DISABLE=1 NCCL_P2P_DISABLE=1 "$B/lanes-run" -n "$n" "$B/lanes_all_reduce_perf" \
  --compare nccl --memory device -b 8K -e 1M -f 2 -n 20 -w 5

# 6.
for r in 4 8; do
  step 45 bound_threads.txt "bound, $r thread ranks alone" -- env CUDA_VISIBLE_DEVICES=0 \
    LANES_THREAD_FASTPATH=1 "$B/lanes_allreduce_bound" --ranks $r
done

pack
{
  grep -hE "tests passed|Total Test|\*\*\*Failed|Timeout" "$logs/ctest_gpu.txt"
  grep -hE "time/bound" "$logs/bound_threads.txt"
  grep -hE "fraction|covered" "$logs/overlap_p2p_on.txt"
} >>"$S" 2>&1
cat "$S"
