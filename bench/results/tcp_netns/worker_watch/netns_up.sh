#!/bin/bash
# Four namespace hosts lanes-x0..lanes-x3 (10.77.0.1-4) on a bridge in lanes-xbr
# (10.77.0.254), kept until `netns_up.sh down`; ab.py runs ranks in them.
set -euo pipefail
if [[ "${1:-}" == down ]]; then
  for ns in lanes-x0 lanes-x1 lanes-x2 lanes-x3 lanes-xbr; do ip netns del "$ns" 2>/dev/null || true; done
  exit 0
fi
ip netns add lanes-xbr
ip -n lanes-xbr link add br0 type bridge
ip -n lanes-xbr link set br0 up
ip -n lanes-xbr addr add 10.77.0.254/24 dev br0
for h in 0 1 2 3; do
  ip netns add lanes-x$h
  ip link add vx$h netns lanes-x$h type veth peer name vbx$h netns lanes-xbr
  ip -n lanes-x$h addr add 10.77.0.$((h + 1))/24 dev vx$h
  ip -n lanes-x$h link set vx$h up
  ip -n lanes-x$h link set lo up
  ip -n lanes-xbr link set vbx$h master br0
  ip -n lanes-xbr link set vbx$h up
done
