# shellcheck shell=sh
# Runs in the soft-RoCE guest (tests/rdma/guest.sh): a reliable-connected
# queue pair's ping-pong through rxe0, server and client on its RoCE v2 GID
# (index 1, the IPv4 address). Fails unless both ends finish every iteration.
ibv_devices | grep -q rxe0 || { echo "FAIL: no rxe0 among the verbs devices"; exit 1; }
# Each end bounded (busybox timeout): a client that fails must not leave the
# server waiting until the harness's timeout.
timeout 60 ibv_rc_pingpong -d rxe0 -g 1 -n 200 -s 4096 >/tmp/server.log 2>&1 &
server=$!
# The client again while the server is not listening yet (a slow guest).
for _ in 1 2 3 4 5 6 7 8 9 10; do
  sleep 1
  timeout 60 ibv_rc_pingpong -d rxe0 -g 1 -n 200 -s 4096 10.77.0.1 >/tmp/client.log 2>&1
  client=$?
  grep -q "Couldn't connect" /tmp/client.log || break
done
[ "$client" -eq 0 ] || kill "$server" 2>/dev/null
wait $server
served=$?
cat /tmp/server.log /tmp/client.log
if [ "$client" -ne 0 ] || [ "$served" -ne 0 ]; then
  echo "FAIL: client $client, server $served"
  exit 1
fi
grep -q "200 iters in" /tmp/client.log || { echo "FAIL: the client did not report 200 iterations"; exit 1; }
echo "PASS: 200 round trips of 4 KiB over rxe0"
