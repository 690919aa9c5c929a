#!/usr/bin/env python3
"""Calibration and regret of the planner's host-path cost model, measured.

For every collective x rank count, runs the perf tool once per eligible host
algorithm forced with LANES_ALGO and once with the planner's default, over
8 B - 1 GiB (8 B x 4^k, then 1 GiB), ranks as processes of this host
(lanes-run), host memory; each candidate runs --repeat times, interleaved with
the others, and each point keeps its fastest run. Beside each measured time it
puts the cost model's prediction for the same call (lanes-topo --plan --json,
the same function a call asks), from inputs measured first by lanes-topo
--probe (cached in OUT/topo_cache.json, which the runs read too).

Writes OUT/calibration.json (every point), OUT/calibration.png (predicted
against measured per algorithm, the default's regret by size) and prints:
  - per algorithm: median |predicted - measured| / measured;
  - the default's regret: its time over the best forced algorithm's, share of
    points within 1.05x and the worst; and the choice regret: the forced run
    of the algorithm the default picks over the best forced one.

  python3 bench/planner/calibrate.py --build build/release --out bench/results/planner_host
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

TOOLS = {
    "allreduce": "lanes_all_reduce_perf",
    "allgather": "lanes_all_gather_perf",
    "reducescatter": "lanes_reduce_scatter_perf",
    "broadcast": "lanes_broadcast_perf",
    "reduce": "lanes_reduce_perf",
    "alltoall": "lanes_alltoall_perf",
    "gather": "lanes_gather_perf",
    "scatter": "lanes_scatter_perf",
}


def size_arg(v):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(v[:-1]) * units[v[-1].upper()] if v[-1].upper() in units else int(v)


def run(cmd, env, what):
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit(f"calibrate: {what} failed ({r.returncode}):\n{r.stdout[-3000:]}")
    return r.stdout


def measure(bindir, coll, nranks, algo, max_bytes, env, scratch, rep):
    """Out-of-place time (us) per size: small sizes with many iterations, large with few."""
    times = {}
    # The plan's sizes: 8 B x 4^k up to 512 MiB, then 1 GiB.
    spans = [(8, min(max_bytes, 1 << 20), 40, 5), (2 << 20, min(max_bytes, 512 << 20), 2, 1),
             (1 << 30, max_bytes, 2, 1)]
    for lo, hi, iters, warmup in spans:
        if lo > hi:
            continue
        out = os.path.join(scratch, f"{coll}_{nranks}_{algo}_{lo}_{rep}.json")
        cmd = [os.path.join(bindir, "lanes-run"), "-n", str(nranks), os.path.join(bindir, TOOLS[coll]),
               "--memory", "host", "-b", str(lo), "-e", str(hi), "-f", "4", "-n", str(iters),
               "-w", str(warmup), "-c", "0", "-J", out]
        e = dict(env)
        if algo != "default":
            e["LANES_ALGO"] = algo
        run(cmd, e, f"{coll} on {nranks} ranks, {algo}")
        with open(out) as f:
            doc = json.load(f)
        for row in doc["results"]:
            times[row["size"]] = {"us": row["out_of_place"]["time"], "plan": row.get("plan")}
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--out", required=True)
    ap.add_argument("--ranks", default="2,3,4")
    ap.add_argument("--collectives", default=",".join(TOOLS))
    ap.add_argument("--max", default="1G", help="largest size (nccl-tests' meaning), default 1G")
    ap.add_argument("--repeat", type=int, default=3, help="runs per candidate, interleaved; default 3")
    ap.add_argument("--no-probe", action="store_true", help="keep OUT/topo_cache.json as it is")
    ap.add_argument("--redraw", action="store_true",
                    help="recompute the summary and the plot from OUT/calibration.json and stop")
    args = ap.parse_args()
    if args.redraw:
        path = os.path.join(args.out, "calibration.json")
        with open(path) as f:
            doc = json.load(f)
        doc["summary"] = summarize(doc["points"])
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
        plot(doc["points"], os.path.join(args.out, "calibration.png"))
        print(json.dumps(doc["summary"], indent=1))
        return
    bindir = os.path.join(args.build, "bin")
    os.makedirs(args.out, exist_ok=True)
    scratch = os.path.join(args.out, "runs")
    os.makedirs(scratch, exist_ok=True)
    env = dict(os.environ)
    env["LANES_TOPO_CACHE"] = os.path.abspath(os.path.join(args.out, "topo_cache.json"))
    env.pop("LANES_ALGO", None)
    topo = os.path.join(bindir, "lanes-topo")
    if not args.no_probe:
        print(run([topo, "--probe"], env, "lanes-topo --probe").splitlines()[0])
    max_bytes = size_arg(args.max)
    points = []
    plan = {}
    for nranks in [int(n) for n in args.ranks.split(",")]:
        for coll in args.collectives.split(","):
            plan = json.loads(run([topo, "--plan", "--json", "--ranks", str(nranks), "--collective", coll],
                                  env, "lanes-topo --plan --json"))
            rows = {r["size"]: r for r in plan["host"] if r["size"] <= max_bytes}
            algos = sorted({c["algo"] for r in rows.values() for c in r["candidates"]})
            # Repetitions interleaved (every candidate, then again), each
            # point the fastest: the noise of a shared machine only adds time.
            measured = {}
            for rep in range(args.repeat):
                for a in algos + ["default"]:
                    for size, t in measure(bindir, coll, nranks, a, max_bytes, env, scratch, rep).items():
                        old = measured.setdefault(a, {}).get(size)
                        if old is None or t["us"] < old["us"]:
                            measured[a][size] = t
            for size, r in sorted(rows.items()):
                predicted = {c["algo"]: c for c in r["candidates"]}
                forced = {a: measured[a][size]["us"] for a in algos if size in measured[a]}
                if size not in measured["default"] or not forced:
                    continue
                best = min(forced.values())
                points.append({
                    "collective": coll, "nranks": nranks, "size": size, "chosen": r["chosen"],
                    "default_us": measured["default"][size]["us"],
                    "default_plan": measured["default"][size]["plan"],
                    "regret": measured["default"][size]["us"] / best,
                    "candidates": [{"algo": a, "measured_us": forced[a],
                                    "predicted_us": predicted[a]["predicted_us"],
                                    "latency_us": predicted[a]["latency_us"],
                                    "transfer_us": predicted[a]["transfer_us"],
                                    "reduce_us": predicted[a]["reduce_us"]} for a in forced],
                })
            print(f"{coll} x {nranks} ranks: {len(rows)} sizes, candidates {', '.join(algos)}", flush=True)
    summary = summarize(points)
    with open(os.path.join(args.out, "calibration.json"), "w") as f:
        json.dump({"format": "lanes-calibration-1", "inputs": plan.get("inputs"), "summary": summary,
                   "points": points}, f, indent=1)
    plot(points, os.path.join(args.out, "calibration.png"))
    print(json.dumps(summary, indent=1))


def summarize(points):
    """Prediction error per algorithm; the default's regret as run, and as chosen: the
    forced run of the algorithm the default picks over the best forced one (the same
    runs, so the noise between separate runs of one algorithm drops out)."""
    errors = {}
    for p in points:
        for c in p["candidates"]:
            errors.setdefault(c["algo"], []).append(abs(c["predicted_us"] - c["measured_us"]) / c["measured_us"])
    regrets = [p["regret"] for p in points]
    chosen = []
    for p in points:
        forced = {c["algo"]: c["measured_us"] for c in p["candidates"]}
        if p["chosen"] in forced:
            chosen.append(forced[p["chosen"]] / min(forced.values()))
    share = lambda rs: round(sum(r <= 1.05 for r in rs) / len(rs), 3) if rs else None
    return {
        "points": len(points),
        "median_error_by_algo": {a: round(statistics.median(e), 3) for a, e in sorted(errors.items())},
        "regret_within_1_05": share(regrets),
        "regret_max": round(max(regrets), 3) if regrets else None,
        "regret_median": round(statistics.median(regrets), 3) if regrets else None,
        "choice_regret_within_1_05": share(chosen),
        "choice_regret_max": round(max(chosen), 3) if chosen else None,
    }


def plot(points, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("calibrate: no matplotlib (Debian: python3-matplotlib): no plot", file=sys.stderr)
        return
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 5.5))
    by_algo = {}
    for p in points:
        for c in p["candidates"]:
            by_algo.setdefault(c["algo"], []).append((c["measured_us"], c["predicted_us"]))
    for algo, xy in sorted(by_algo.items()):
        a.scatter([x for x, _ in xy], [y for _, y in xy], s=12, label=algo)
    lo = min(min(x, y) for xy in by_algo.values() for x, y in xy)
    hi = max(max(x, y) for xy in by_algo.values() for x, y in xy)
    a.plot([lo, hi], [lo, hi], "k--", lw=0.8)
    a.set(xscale="log", yscale="log", xlabel="measured (us)", ylabel="predicted (us)",
          title="Host cost model: predicted against measured")
    a.legend()
    for key in sorted({(p["collective"], p["nranks"]) for p in points}):
        pts = [p for p in points if (p["collective"], p["nranks"]) == key]
        b.plot([p["size"] for p in pts], [p["regret"] for p in pts], marker=".", lw=0.8,
               label=f"{key[0]} x{key[1]}")
    b.axhline(1.05, color="k", ls="--", lw=0.8)
    b.set(xscale="log", xlabel="size (bytes)", ylabel="default / best forced",
          title="The default's regret")
    b.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
