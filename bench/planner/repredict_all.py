#!/usr/bin/env python3
"""Re-prices every stored calibration under bench/results with a build's cost
model, and compares the errors and choices with an earlier pass.

A change to the cost model is checked against every measurement already
taken, on every machine they came from, without a GPU or those machines:
each calibration.json beside a topology.json (the machine and its probes) is
copied to OUT/<its folder, slashes as _>/ and re-predicted there with
calibrate.py --repredict. Folders named `repredicted*` (copies already
re-priced) are left out, and output folders are named by the path with
slashes as underscores.

  python3 bench/planner/repredict_all.py --build build/release --out /tmp/rp/before
  (change the model, rebuild)
  python3 bench/planner/repredict_all.py --build build/release --out /tmp/rp/after \\
      --baseline /tmp/rp/before

Writes OUT/summary.json ({calibration: {errors, choice_within_1_05,
choice_max}}) and prints a line per calibration: the choice within 1.05x of
the best forced candidate, the worst choice, and each candidate's median
|predicted - measured| / measured; with --baseline, as before -> after, then
how many of those errors moved by more than a point each way and each
candidate's mean error over the calibrations both passes priced. Calibrations
without a topology.json (kept before it was) are named and left out.
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def stored(results, memory, unpriced=None):
    """Folders holding a calibration of `memory` and its machine; those
    without the machine (topology.json) are appended to `unpriced`."""
    for folder, dirs, files in os.walk(results):
        dirs.sort()
        if os.path.basename(folder).startswith("repredicted"):
            dirs[:] = []
            continue
        if "calibration.json" not in files:
            continue
        if "topology.json" not in files:
            if unpriced is not None:
                unpriced.append(folder)
            continue
        with open(os.path.join(folder, "calibration.json")) as f:
            kind = json.load(f).get("memory")
        if memory == "all" or kind == memory:
            yield folder


def reprice(build, results, folder, out):
    name = os.path.relpath(folder, results).replace(os.sep, "_")
    target = os.path.join(out, name)
    os.makedirs(target, exist_ok=True)
    for f in ("calibration.json", "topology.json"):
        shutil.copy(os.path.join(folder, f), target)
    run = subprocess.run([sys.executable, os.path.join(HERE, "calibrate.py"), "--build", build,
                          "--out", target, "--repredict"], capture_output=True, text=True)
    if run.returncode != 0:
        return name, {"failed": (run.stderr or run.stdout).strip().splitlines()[-1:]}
    with open(os.path.join(target, "calibration.json")) as f:
        s = json.load(f)["summary"]
    return name, {"errors": s.get("median_error_by_algo", {}),
                  "choice_within_1_05": s.get("choice_regret_within_1_05"),
                  "choice_max": s.get("choice_regret_max")}


def number(v):
    return "-" if v is None else f"{v:.2f}"


def report(summary, before):
    """The lines printed: per calibration, then with a baseline the counts of
    errors moved, and each candidate's mean over the calibrations priced by
    both passes (by this one alone without a baseline)."""
    lines = []
    better = worse = 0
    totals = {}  # candidate -> [sum before, sum after, count], over calibrations in both
    for name in sorted(summary):
        now = summary[name]
        if "failed" in now:
            lines.append(f"{name}: re-pricing failed: {' '.join(now['failed'])}")
            continue
        old = before.get(name, {})
        if "failed" in old:
            old = {}

        def pair(key, get=lambda s, k: s.get(k)):
            if not old:
                return number(get(now, key))
            return f"{number(get(old, key))}->{number(get(now, key))}"

        cells = []
        for algo in sorted(now["errors"]):
            e = now["errors"][algo]
            o = old.get("errors", {}).get(algo) if old else None
            cells.append(f"{algo} {pair(algo, lambda s, k: s.get('errors', {}).get(k))}")
            if before and o is None:
                continue  # a mean over both passes takes only what both priced
            t = totals.setdefault(algo, [0.0, 0.0, 0])
            t[0] += o or 0.0
            t[1] += e
            t[2] += 1
            if o is not None:
                better += e < o - 0.01
                worse += e > o + 0.01
        lines.append(f"{name}: choice {pair('choice_within_1_05')} worst {pair('choice_max')} | "
                     + "  ".join(cells))
    if before:
        lines.append(f"errors better by more than a point: {better}, worse: {worse}")
    for algo, (o, e, n) in sorted(totals.items()):
        lines.append(f"{algo}: mean of medians {(o / n):.3f} -> {(e / n):.3f} over {n}" if before
                     else f"{algo}: mean of medians {(e / n):.3f} over {n}")
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", required=True, help="build folder whose lanes-topo prices")
    p.add_argument("--out", required=True)
    p.add_argument("--baseline", help="an earlier --out to compare with")
    p.add_argument("--memory", default="host", choices=["host", "device", "all"])
    p.add_argument("--results", default=os.path.join(ROOT, "bench", "results"))
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    unpriced = []
    folders = list(stored(a.results, a.memory, unpriced))
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        summary = dict(pool.map(lambda d: reprice(a.build, a.results, d, a.out), folders))
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
    before = {}
    if a.baseline:
        with open(os.path.join(a.baseline, "summary.json")) as f:
            before = json.load(f)
    for folder in unpriced:
        print(f"{os.path.relpath(folder, a.results)}: not re-priced, no topology.json beside it "
              "(calibrate.py --repredict --topology F prices it for a machine given)")
    print("\n".join(report(summary, before)))

if __name__ == "__main__":
    main()
