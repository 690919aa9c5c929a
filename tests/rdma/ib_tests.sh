# shellcheck shell=sh
# Runs in the soft-RoCE guest (tests/rdma/guest.sh, --env LANES_RDMA_TESTS=<path>):
# every test of the verbs transport; all of them must run, none skip.
"$LANES_RDMA_TESTS" --gtest_brief=1 2>&1
