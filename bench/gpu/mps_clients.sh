#!/bin/bash
# How many processes can share GPU 0 under MPS, by CUDA_DEVICE_MAX_CONNECTIONS: starts
# N clients at once (bench/gpu/mps_client.cu) for N = 1, 2, 4, 8, 16 per setting, counts
# those that got a context, memory and a kernel, then prints the MPS server's log.
# Run inside bench/gpu/with_mps.sh (it reads CUDA_MPS_LOG_DIRECTORY).
#
#   bash bench/gpu/with_mps.sh bash bench/gpu/mps_clients.sh [SETTING...]
#   (SETTING: a CUDA_DEVICE_MAX_CONNECTIONS value or "unset"; default: unset 8 32)
set -u
here=$(cd "$(dirname "$0")" && pwd)
client=$(mktemp /tmp/mps_client.XXXXXX)
trap 'rm -f "$client"' EXIT
nvcc -O2 -o "$client" "$here/mps_client.cu" || exit 2
echo "# /dev/shm: $(df -h /dev/shm | awk 'NR == 2 {print $2 " size, " $4 " free"}');" \
  "open files: $(ulimit -n); locked memory: $(ulimit -l)"
[ $# -gt 0 ] || set -- unset 8 32
for setting in "$@"; do
  for n in 1 2 4 8 16; do
    outs=()
    for i in $(seq "$n"); do
      outs+=("$(mktemp)")
      if [ "$setting" = unset ]; then
        env -u CUDA_DEVICE_MAX_CONNECTIONS "$client" 3000 >"${outs[-1]}" 2>&1 &
      else
        CUDA_DEVICE_MAX_CONNECTIONS=$setting "$client" 3000 >"${outs[-1]}" 2>&1 &
      fi
    done
    wait
    good=$(cat "${outs[@]}" | grep -c ': ok ')
    printf 'CUDA_DEVICE_MAX_CONNECTIONS=%-5s %2d clients at once: %2d ok\n' "$setting" "$n" "$good"
    cat "${outs[@]}" | grep -v ': ok ' | sort | uniq -c | sed 's/^/    /' | head -5
    rm -f "${outs[@]}"
  done
done
log=${CUDA_MPS_LOG_DIRECTORY:-}
if [ -n "$log" ] && [ -f "$log/server.log" ]; then
  echo "# MPS server log (lines with fail, error, limit or connection):"
  grep -i -E 'fail|error|limit|connection|exceed' "$log/server.log" | sort | uniq -c | sort -rn | head -20
fi
