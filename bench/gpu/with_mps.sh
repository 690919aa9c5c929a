#!/bin/bash
# Runs a command with an MPS control daemon of its own on the visible GPUs, so
# that processes sharing a GPU run at once instead of taking time slices; the
# daemon is stopped when the command ends, fails or is stopped. The pipe and
# log folders are private: no other CUDA program on the machine joins this MPS.
#
#   bash bench/gpu/with_mps.sh COMMAND...
set -u
command -v nvidia-cuda-mps-control >/dev/null || {
  echo "with_mps.sh: nvidia-cuda-mps-control not found" >&2
  exit 2
}
# Under MPS the clients of a GPU share one pool of hardware queues and each takes
# CUDA_DEVICE_MAX_CONNECTIONS of them: on the H200 at 32 only two clients came up
# (the third failed cudaSetDevice with "out of memory"), at 8 eight, unset sixteen
# (bench/gpu/mps_clients.sh). The tools ask for 32 only where a process holds
# several ranks; a command that wants a value sets it itself (env VAR=N ...).
unset CUDA_DEVICE_MAX_CONNECTIONS
dir=$(mktemp -d /tmp/lanes-mps.XXXXXX)
export CUDA_MPS_PIPE_DIRECTORY=$dir/pipe CUDA_MPS_LOG_DIRECTORY=$dir/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
stop() {
  echo quit | nvidia-cuda-mps-control >/dev/null 2>&1
  for _ in $(seq 50); do
    pgrep -f "nvidia-cuda-mps-(control|server)" >/dev/null || break
    sleep 0.1
  done
  rm -rf "$dir"
}
pid=
trap '[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid"; stop; exit 143' TERM INT
nvidia-cuda-mps-control -d || {
  echo "with_mps.sh: the MPS daemon did not start (log: $CUDA_MPS_LOG_DIRECTORY)" >&2
  rm -rf "$dir"
  exit 2
}
echo "with_mps.sh: MPS daemon started (pipe $CUDA_MPS_PIPE_DIRECTORY)"
"$@" &
pid=$!
wait "$pid"
rc=$?
pid=
stop
exit $rc
