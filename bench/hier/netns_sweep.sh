#!/bin/bash
# The hierarchical all-reduce against the flat ring across "hosts" made on this
# machine: H network namespaces on one bridge (itself in a namespace of its
# own), each a host (LANES_HOSTID) of L ranks. Ranks of one namespace share
# memory; between namespaces they talk TCP over the veths. All traffic stays
# inside the namespaces this script creates, which it removes at the end.
# Needs root (CAP_NET_ADMIN) and iproute2.
#
#   bash bench/hier/netns_sweep.sh [BUILD] [OUT] [HOSTSxRANKS...]   # defaults build/release, bench/results/hier_netns, 2x2 4x2
#   COLLECTIVES="all_gather reduce_scatter" bash bench/hier/netns_sweep.sh ...  # default all_reduce
#
# Writes OUT/<collective>_<H>x<L>_<algorithm>.json (the perf tool's: ring, hierarchical, and
# the planner's default) and OUT/summary.md: per collective, layout and size, each one's
# time, the flat ring's over hierarchical's, and the default's plan and its time over the
# faster one's.
set -eu
build=$(cd "${1:-build/release}" && pwd)
out=${2:-bench/results/hier_netns}
shift $(($# < 2 ? $# : 2))
layouts=("${@:-2x2 4x2}")
read -r -a layouts <<<"${layouts[*]}"
mkdir -p "$out"
out=$(cd "$out" && pwd)
tag=$$
net=10.203.$((tag % 250 + 1))
br=lanes-hbr-$tag
spaces=()
cleanup() {
  for ns in "${spaces[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
}
trap cleanup EXIT
ip netns add "$br"
spaces+=("$br")
ip -n "$br" link add br0 type bridge
ip -n "$br" link set br0 up
maxHosts=0
for l in "${layouts[@]}"; do h=${l%x*}; [ "$h" -gt "$maxHosts" ] && maxHosts=$h; done
for ((h = 0; h < maxHosts; h++)); do
  ns=lanes-h$h-$tag
  ip netns add "$ns"
  spaces+=("$ns")
  ip link add "vh$h-$tag" netns "$ns" type veth peer name "vb$h-$tag" netns "$br"
  ip -n "$ns" addr add "$net.$((h + 1))/24" dev "vh$h-$tag"
  ip -n "$ns" link set "vh$h-$tag" up
  ip -n "$ns" link set lo up
  ip -n "$br" link set "vb$h-$tag" master br0
  ip -n "$br" link set "vb$h-$tag" up
done
# Each rank enters its host's namespace under that host's identity.
wrap=$(mktemp /tmp/lanes-hier-rank.XXXXXX)
cat >"$wrap" <<SH
#!/bin/bash
h=\$((LANES_RANK / HIER_LOCAL))
exec ip netns exec lanes-h\$h-$tag env LANES_HOSTID=lanes-hier-host-\$h "\$@"
SH
chmod +x "$wrap"
spaces+=()  # (the wrapper is removed below)
colls=(${COLLECTIVES:-all_reduce})
for coll in "${colls[@]}"; do
  for l in "${layouts[@]}"; do
    hosts=${l%x*} local=${l#*x}
    for algo in ring hierarchical default; do
      env $([ $algo != default ] && echo LANES_ALGO=$algo) HIER_LOCAL="$local" \
        LANES_SOCKET_IFNAME=vh LANES_ROOT_ADDR="$net.1:$((40000 + tag % 20000))" \
        "$build/bin/lanes-run" -n $((hosts * local)) "$wrap" "$build/bin/lanes_${coll}_perf" \
        -b 1M -e 256M -f 4 -n 5 -w 1 -J "$out/${coll}_${l}_${algo}.json" >/dev/null
    done
  done
done
rm -f "$wrap"
python3 - "$out" "${#colls[@]}" "${colls[@]}" "${layouts[@]}" <<'PY'
import json, sys
out, ncolls = sys.argv[1], int(sys.argv[2])
colls, layouts = sys.argv[3:3 + ncolls], sys.argv[3 + ncolls:]
lines = ["# Hierarchical collectives against the flat ring, host buffers, float32 (sum)",
         "",
         "H network namespaces (hosts) x L ranks each, TCP over veths between them, shared",
         "memory within; out-of-place time per call (us), each the perf tool's mean of 5;",
         "sizes are the perf tool's (an all-gather's: the whole output).",
         "",
         "| collective | hosts x ranks | size | ring | hierarchical | ring / hierarchical | default (plan) | default / faster |",
         "|---|---|---|---|---|---|---|---|"]
for coll in colls:
    for l in layouts:
        rows = {a: {r["size"]: r for r in json.load(open(f"{out}/{coll}_{l}_{a}.json"))["results"]}
                for a in ("ring", "hierarchical", "default")}
        for size in sorted(rows["ring"]):
            ring, h = (rows[a][size]["out_of_place"]["time"] for a in ("ring", "hierarchical"))
            d = rows["default"][size]
            t = d["out_of_place"]["time"]
            lines.append(f"| {coll} | {l} | {size >> 20} MiB | {ring:.0f} | {h:.0f} | {ring / h:.2f} | "
                         f"{t:.0f} ({d.get('plan', '?')}) | {t / min(ring, h):.2f} |")
open(f"{out}/summary.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
