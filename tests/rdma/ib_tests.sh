# shellcheck shell=sh
# Runs in the soft-RoCE guest (tests/rdma/guest.sh, --env LANES_RDMA_TESTS=<path>):
# every test of the verbs transport; all of them must run, none skip.
# A second port that rxe0 cannot reach: rxe1 on a veth of its own, not joined
# to veth0 (IbTransport.PortsThatCannotReachEachOther...).
ip=/usr/local/sbin/ip
$ip link add veth2 type veth peer name veth3 || echo "guest: no veth2"
$ip addr add 10.78.0.1/24 dev veth2
$ip link set veth2 up
$ip link set veth3 up
rdma link add rxe1 type rxe netdev veth2 || echo "guest: rdma link add rxe1 failed"
"$LANES_RDMA_TESTS" --gtest_brief=1 2>&1
