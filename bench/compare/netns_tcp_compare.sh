#!/usr/bin/env bash
# Lanes against Open MPI (--mca btl tcp,self) and Gloo over TCP between
# "hosts" made on this machine: H network namespaces joined by veths to a
# bridge (in a namespace of its own), one rank in each, so every byte
# between ranks crosses a veth as TCP. All-reduce (float sum) and all-gather,
# host buffers, side by side in one run. Traffic stays inside the namespaces
# this script makes; it removes them at the end. Needs root and iproute2.
#
#   bench/compare/netns_tcp_compare.sh [BIN_DIR] [OUT]   (default: this script's
#        folder, i.e. build/<preset>/bin; bench/results/tcp_netns)
#   env: HOSTS="2 4"  MINBYTES=1M  MAXBYTES=256M  ITERS=5  WARMUP=2
#        ONLY=lanes: Lanes alone (A/B runs of its variables, which pass through to
#        its ranks), no summary
#
# Writes OUT/<tool>_<collective>_<H>.txt (each tool's table) and OUT/summary.md:
# per collective, host count and size, each tool's out-of-place busbw and
# Lanes over the better of the other two. Gloo is left out (and the summary
# says so) where gloo_perf was not built (Debian's libgloo-dev).
set -euo pipefail
bin=$(cd "${1:-$(dirname "$0")}" && pwd)
out=${2:-bench/results/tcp_netns}
hosts_list=${HOSTS:-"2 4"}
minbytes=${MINBYTES:-1M} maxbytes=${MAXBYTES:-256M} iters=${ITERS:-5} warmup=${WARMUP:-2}
only=${ONLY:-}
[[ -z "$only" || "$only" == lanes ]] || { echo "netns_tcp_compare.sh: ONLY takes 'lanes', not '$only'" >&2; exit 2; }
tools=(lanes-run lanes_all_reduce_perf lanes_all_gather_perf)
[[ -n "$only" ]] || tools+=(mpi_allreduce_perf mpi_allgather_perf)
for tool in "${tools[@]}"; do
  [[ -x "$bin/$tool" ]] || { echo "netns_tcp_compare.sh: $bin/$tool not found; build it first" >&2; exit 2; }
done
gloo=1
[[ -x "$bin/gloo_perf" && -z "$only" ]] || gloo=0
mkdir -p "$out"
out=$(cd "$out" && pwd)
tag=$$
net=10.204.$((tag % 250 + 1))
spaces=()
tmp=$(mktemp -d /tmp/lanes-tcpcmp.XXXXXX)
cleanup() {
  for ns in "${spaces[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
br=lanes-tbr-$tag
ip netns add "$br" && spaces+=("$br")
ip -n "$br" link add br0 type bridge
ip -n "$br" link set br0 up
# mpirun runs in the bridge's namespace, so its PMIx server (TCP only) is
# reachable from every host's namespace at this address.
ip -n "$br" addr add "$net.254/24" dev br0
maxHosts=0
for h in $hosts_list; do ((h > maxHosts)) && maxHosts=$h; done
for ((h = 0; h < maxHosts; h++)); do
  ns=lanes-t$h-$tag
  ip netns add "$ns" && spaces+=("$ns")
  ip link add "vt$h-$tag" netns "$ns" type veth peer name "vb$h-$tag" netns "$br"
  ip -n "$ns" addr add "$net.$((h + 1))/24" dev "vt$h-$tag"
  ip -n "$ns" link set "vt$h-$tag" up
  ip -n "$ns" link set lo up
  ip -n "$br" link set "vb$h-$tag" master br0
  ip -n "$br" link set "vb$h-$tag" up
done
# Each rank runs in the namespace of its host: rank r on host r.
cat >"$tmp/rank" <<SH
#!/bin/bash
r=\${LANES_RANK:-\${OMPI_COMM_WORLD_RANK:?}}
exec ip netns exec lanes-t\$r-$tag env LANES_HOSTID=lanes-tcp-host-\$r GLOO_HOSTNAME=$net.\$((r + 1)) "\$@"
SH
chmod +x "$tmp/rank"
sweep=(-b "$minbytes" -e "$maxbytes" -f 4 -n "$iters" -w "$warmup")
for h in $hosts_list; do
  # More ranks than cores: Open MPI busy-polls unless told to yield.
  if ((h > $(nproc))); then export OMPI_MCA_mpi_yield_when_idle=1; else unset OMPI_MCA_mpi_yield_when_idle; fi
  for coll in all_reduce all_gather; do
    LANES_SOCKET_IFNAME=vt LANES_ROOT_ADDR="$net.1:$((40000 + tag % 20000))" \
      "$bin/lanes-run" -n "$h" "$tmp/rank" "$bin/lanes_${coll}_perf" --memory host -c 0 "${sweep[@]}" \
      >"$out/lanes_${coll}_$h.txt"
    [[ -z "$only" ]] || continue
    PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include="$net.0/24" \
      ip netns exec "$br" \
      mpirun --allow-run-as-root --oversubscribe -np "$h" --mca pml ob1 --mca btl tcp,self \
      --mca btl_tcp_if_include "$net.0/24" "$tmp/rank" "$bin/mpi_${coll/_/}_perf" "${sweep[@]}" \
      >"$out/mpi_${coll}_$h.txt"
    if ((gloo)); then
      rm -rf "$tmp/store" && mkdir "$tmp/store"
      GLOO_STORE_DIR="$tmp/store" "$bin/lanes-run" -n "$h" "$tmp/rank" "$bin/gloo_perf" \
        "${coll/_/}" "${sweep[@]}" >"$out/gloo_${coll}_$h.txt"
    fi
  done
done
[[ -z "$only" ]] || exit 0
python3 - "$out" "$gloo" $hosts_list <<'PY'
import sys
out, gloo, hosts = sys.argv[1], sys.argv[2] == "1", sys.argv[3:]
def rows(path, factor):  # size -> (out-of-place µs, busbw GB/s); launcher prefixes removed
    table = {}
    for line in open(path):
        f = line.split("] ", 1)[-1].split() if line.startswith("[") else line.split()
        if len(f) >= 9 and f[0].isdigit():
            us = float(f[5])
            table[int(f[0])] = (us, int(f[0]) / 1e3 / us * factor)
    return table
tools = ["lanes", "mpi"] + (["gloo"] if gloo else [])
lines = ["# Lanes vs Open MPI vs Gloo over TCP between network namespaces",
         "",
         "One rank per namespace (host), veths to one bridge; host buffers, float32; out-of-place",
         "busbw (GB/s) from each tool's time per call (Lanes, MPI: mean over ranks; Gloo: rank 0).",
         "Open MPI: --mca pml ob1 --mca btl tcp,self. Gloo: ring all-reduce, all-gather, TCP."
         + ("" if gloo else " Gloo: not built here (install libgloo-dev)."),
         "ratio = Lanes busbw / the better of the others'.",
         "",
         "| collective | hosts | size | " + " | ".join(f"{t} µs | {t} busbw" for t in tools) + " | ratio |",
         "|---|---:|---:|" + "---:|---:|" * len(tools) + "---:|"]
for coll in ("all_reduce", "all_gather"):
    for h in hosts:
        n = int(h)
        factor = 2 * (n - 1) / n if coll == "all_reduce" else (n - 1) / n
        t = {tool: rows(f"{out}/{tool}_{coll}_{h}.txt", factor) for tool in tools}
        for size in sorted(t["lanes"]):
            if not all(size in t[x] for x in tools):
                continue
            best = max(t[x][size][1] for x in tools[1:])
            cells = " | ".join(f"{t[x][size][0]:.0f} | {t[x][size][1]:.3f}" for x in tools)
            ratio = t["lanes"][size][1] / best if best > 0 else float("nan")
            lines.append(f"| {coll} | {h} | {size >> 20} MiB | {cells} | {ratio:.2f} |")
open(f"{out}/summary.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
