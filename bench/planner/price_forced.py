#!/usr/bin/env python3
"""Measured against priced, per forced device path, from a bench/gpu/run.sh log.

Reads the perf tools' result rows of a log whose steps force one path each
(`=== lanes_<coll>_perf, ... LANES_PROTO=<path>,proxy`, as the mps-paths job
writes them), asks the cost model of the build given (lanes-topo --plan --json)
for the same machine (--topology, the run's lanes-topo --json) and prints, per
collective and planned size, each path's measured / priced time (us, the faster
of out of place and in place) and the plan's choice. The environment is the
caller's: set LANES_P2P_DISABLE=1 when the run had it.

  LANES_P2P_DISABLE=1 python3 bench/planner/price_forced.py \\
      --build build/release --topology bench/results/mps_paths_h200/topology.json \\
      --ranks 2 --mps bench/results/mps_paths_h200/mps-paths.txt
"""
import argparse
import json
import os
import re
import subprocess
import sys

STEP = re.compile(r"^=== lanes_(\w+)_perf, .*LANES_PROTO=(\w+),proxy")


def measured(log):
    """{collective: {size: {path: us}}} from the log's result rows."""
    out, step = {}, None
    with open(log) as f:
        for line in f:
            m = STEP.match(line)
            if m:
                step = (m.group(1).replace("_", ""), m.group(2))
                continue
            if line.startswith("==="):
                step = None
                continue
            cols = line.split()
            if step and len(cols) > 9 and cols[0].isdigit():
                us = min(float(cols[5]), float(cols[9]))
                out.setdefault(step[0], {}).setdefault(int(cols[0]), {})[step[1]] = us
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--topology", required=True)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--mps", action="store_true", help="plan for processes under MPS")
    args = ap.parse_args()
    topo = os.path.join(args.build, "bin", "lanes-topo")
    errors = {}
    for coll, rows in measured(args.log).items():
        cmd = [topo, "--plan", "--json", "--ranks", str(args.ranks), "--collective", coll,
               "--topology", args.topology, "--mps" if args.mps else "--no-mps"]
        plan = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
        priced = {r["size"]: r for r in plan["device"]}
        print(f"{coll} (measured / priced us)")
        for size in sorted(s for s in rows if s in priced):
            prices = {c["path"]: c["predicted_us"] for c in priced[size]["candidates"]}
            cells, ran = [], {}
            for path, us in sorted(rows[size].items()):
                p = prices.get(path)
                if p is None:  # not eligible at this size: the proxy ran instead
                    cells.append(f"{path} -")
                    continue
                ran[path] = us
                cells.append(f"{path} {us:.0f} / {p:.0f}")
                errors.setdefault(path, []).append(abs(p - us) / us)
            fastest = min(ran, key=ran.get) if ran else "-"
            print(f"  {size >> 10:>6} KiB  chosen {priced[size]['chosen']:<8} fastest "
                  f"{fastest:<8} " + "  ".join(cells))
    for path, e in sorted(errors.items()):
        e.sort()
        print(f"median |priced - measured| / measured, {path}: {e[len(e) // 2]:.0%} of {len(e)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
