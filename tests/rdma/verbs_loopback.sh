# shellcheck shell=sh
# Runs in the soft-RoCE guest (tests/rdma/guest.sh, --env LANES_RDMA_LOOPBACK=<path>).
"$LANES_RDMA_LOOPBACK" rxe0
