#!/usr/bin/env bash
# The RDMA benchmark of docs/network.md: boots the soft-RoCE guest of
# tests/rdma/guest.sh and runs bench/rdma/sweep_in_guest.sh in it, against
# this build's tools. Prints the guest's output; exit status the guest's.
#
#   bench/rdma/run.sh [BUILD_DIR]      (default build/release)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=$(cd "${1:-$repo/build/release}/bin" && pwd)
command -v ib_write_bw >/dev/null || { echo "run.sh: install perftest (ib_write_bw)" >&2; exit 2; }
exec bash "$repo/tests/rdma/guest.sh" --timeout 1500 --cpus 2 --memory 3072 \
  --add "$bin/lanes-run" --add "$bin/lanes_all_reduce_perf" --add "$bin/lanes_all_gather_perf" \
  --add ib_write_bw --env "RDMA_BENCH_BIN=$bin" "$here/sweep_in_guest.sh"
