#!/usr/bin/env python3
"""Calibration and regret of the planner's cost model, measured.

For every collective x rank count (a group), runs the perf tool once per
candidate the plan lists, forced, and once with the planner's default. Host
memory (--memory host, the default): the candidates are the host algorithms,
forced with LANES_ALGO. Device memory (--memory device): the candidates are
the eligible device paths (shared_context, ll, ll_threads, staged, proxy, as
the plan's "device" rows list them), each forced with LANES_PROTO=<path> (a
call the path does not serve falls back to the proxy); the default runs
without LANES_PROTO. Ranks are processes of this host under lanes-run
(--launch processes, the default) or threads of one perf tool process
(--launch threads: <tool> -t N, the plan asked with lanes-topo --threads);
with device memory rank r uses GPU r % (visible GPUs), so one GPU holds every
rank (CUDA_VISIBLE_DEVICES is the caller's).

Sizes: 8 B x 4^k up to 512 MiB, then 1 GiB (nccl-tests' meaning), from --min
to --max. Host memory runs them in spans (up to 128 KiB 5 cycles of 100
iterations, up to 1 MiB 2 cycles of 40, up to 8 MiB 20 iterations, then 2; a
size keeps its fastest cycle), device memory in one span up to 512 MiB with 40; a device path runs only
over the sizes where the plan lists it. Each candidate runs --repeat times,
interleaved with the others, and each point keeps its fastest run (and every
pass's time: passes_us, and the default's default_passes_us). Each pass starts
one place further along the candidates, the default first in the first pass:
run last in every pass, the default came out 1.12-1.17x slower (median) than
the forced run of the plan it ran at 8 ranks on 16 cores, and 0.97-1.04x when
the two alternated. Beside each
measured time it puts the cost model's prediction for the same call
(lanes-topo --plan --json, the same function a call asks), from inputs
measured first by lanes-topo --probe (cached in OUT/topo_cache.json, which the
runs read too; --no-probe keeps the file there).

The machine the predictions were made for is kept as OUT/topology.json
(lanes-topo --json, the probes in it), and the run's settings that shape a
plan (PLAN_SETTINGS: LANES_P2P_DISABLE, the paths' limits, ...) as "env" in
OUT/calibration.json. --repredict asks the cost model of the build given
again, for every stored point, with that file (or --topology F) and the run's
settings in place of the caller's LANES_* (--env VAR=VALUE asks what if), and
rewrites the predictions, choices and summary: a changed model is checked
against the same measurements on any machine, GPU or none.

--time-budget S: no group starts once S seconds have passed or when the longest
group so far would end past S, and a run still going at S is stopped (its group
keeps its points if every candidate finished one pass). OUT/calibration.json
is rewritten after every group, so a run stopped from outside keeps the groups
done. A run that fails is named in the summary (and the exit code is 1); the
other groups go on.

Writes OUT/calibration.json (every point, each with its memory and launch),
OUT/calibration.png (predicted against measured per candidate, the default's
regret by size) and prints, a key a line:
  - median_error_by_algo: per candidate (algorithm or path),
    median |predicted - measured| / measured;
  - the default's regret: its time over the best forced candidate the default
    may choose (paths off unless LANES_PROTO names them, like ll_threads, are
    measured and predicted but left out), share of points within 1.05x and the
    worst, and the same against every forced candidate (regret_any_*); and the
    choice regret: the forced run of the candidate the default picks over the
    best forced one it may choose;
  - how far one pass tells the next, where each point keeps every pass's time
    per candidate (passes_us): the one-pass oracle's share within 1.05x
    (choice_regret_one_pass_oracle_within_1_05) and the choice misses within
    the run-to-run spread (choice_regret_misses_within_spread);
  - skipped_groups and failed_runs, when there are any.

  python3 bench/planner/calibrate.py --build build/release --out bench/results/planner_host
  python3 bench/planner/calibrate.py --build build/g --out OUT --memory device \\
      --launch threads --ranks 2,4 --max 256M --repeat 2 --time-budget 300
  python3 bench/planner/calibrate.py --out OUT --redraw   # summary and plot from OUT's JSON
  python3 bench/planner/calibrate.py --build build/release --out OUT --repredict
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time

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

# What forces a candidate, and its key in the plan's candidates, per memory.
FORCE = {"host": "LANES_ALGO", "device": "LANES_PROTO"}
KEY = {"host": "algo", "device": "path"}


class Failed(Exception):
    pass


class OutOfTime(Exception):
    pass


def size_arg(v):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(v[:-1]) * units[v[-1].upper()] if v[-1].upper() in units else int(v)


def on_grid(n):
    """The smallest plan size (8 B x 4^k up to 512 MiB, then 1 GiB) of n or more."""
    s = 8
    while s < n and s < (512 << 20):
        s *= 4
    return s if s >= n else 1 << 30


def name_of(c):
    """A candidate's name: "name", or "algo" (host files before device paths), or "path"."""
    return c.get("name") or c.get("algo") or c.get("path")


def run(cmd, env, what, deadline=None):
    """stdout+stderr of cmd; Failed on a non-zero exit, OutOfTime (its process group
    stopped) when it is still going at deadline (time.monotonic())."""
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=None if deadline is None else max(deadline - time.monotonic(), 0))
    except subprocess.TimeoutExpired:
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, None)):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                break
            try:
                p.communicate(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                pass
        raise OutOfTime(what)
    if p.returncode != 0:
        raise Failed(f"{what} failed ({p.returncode}):\n{out[-3000:]}")
    return out


# A perf tool run's file in OUT/runs, and its name read back (passes_from_runs).
RUN_FILE = re.compile(r"^([a-z]+)_(\d+)_(.+)_(\d+)_(\d+)\.json$")


def run_file(coll, nranks, name, first_size, rep):
    return f"{coll}_{nranks}_{name}_{first_size}_{rep}.json"


def pass_order(names, rep):
    """The runs of pass `rep`: the default and the candidates, starting one place
    further along each pass, the default first in the first."""
    runs = ["default"] + names
    turn = rep % len(runs)
    return runs[turn:] + runs[:turn]


def measure(args, bindir, coll, nranks, name, lo_bytes, hi_bytes, env, scratch, rep, deadline):
    """Out-of-place time (us) per size from lo_bytes to hi_bytes."""
    times = {}
    if args.memory == "host":
        # Small sizes with many iterations in several cycles (a cycle a preemption hit
        # is dropped by taking the fastest), large with few.
        spans = [(8, 128 << 10, 100, 5, 5), (256 << 10, 1 << 20, 40, 5, 2), (2 << 20, 8 << 20, 20, 3, 1),
                 (16 << 20, 512 << 20, 2, 1, 1), (1 << 30, hi_bytes, 2, 1, 1)]
    else:
        # Device calls up to 512 MiB take milliseconds: one run (one CUDA start) for all.
        spans = [(8, 512 << 20, 40, 5, 1), (1 << 30, hi_bytes, 2, 1, 1)]
    for lo, hi, iters, warmup, cycles in spans:
        lo, hi = on_grid(max(lo, lo_bytes)), min(hi, hi_bytes)
        if lo > hi:
            continue
        out = os.path.join(scratch, run_file(coll, nranks, name, lo, rep))
        tool = os.path.join(bindir, TOOLS[coll])
        if args.launch == "threads":
            cmd = [tool, "-t", str(nranks)]
        else:
            cmd = [os.path.join(bindir, "lanes-run"), "-n", str(nranks), tool]
        cmd += ["--memory", args.memory, "-b", str(lo), "-e", str(hi), "-f", "4", "-n", str(iters),
                "-w", str(warmup), "-N", str(cycles), "-c", "0", "-J", out]
        if args.memory == "device":
            cmd.append("--bounds=0")  # the copy-rate bounds cost a second per run, unused here
        e = dict(env)
        if name != "default":
            e[FORCE[args.memory]] = name
        run(cmd, e, f"{coll} on {nranks} ranks ({args.launch}), {name}", deadline)
        with open(out) as f:
            doc = json.load(f)
        for row in doc["results"]:
            t = row["out_of_place"]["time"]
            if row["size"] not in times or t < times[row["size"]]["us"]:
                times[row["size"]] = {"us": t, "plan": row.get("plan")}
    return times


def save_topology(topo, env, out, deadline):
    """OUT/topology.json: the machine the predictions are for, probes included."""
    try:
        text = run([topo, "--json"], env, "lanes-topo --json", deadline)
    except (Failed, OutOfTime) as e:
        print(f"calibrate: no OUT/topology.json ({e})", file=sys.stderr, flush=True)
        return
    with open(os.path.join(out, "topology.json"), "w") as f:
        f.write(text[text.index("{"):])


def best_allowed(p):
    """The fastest forced time among the candidates the default may choose."""
    allowed = [c["measured_us"] for c in p["candidates"] if c.get("allowed", True)]
    return min(allowed) if allowed else min(c["measured_us"] for c in p["candidates"])


# The settings that shape a plan (docs/env.md): which transports and paths
# a communicator sets up, and their sizes. Not the forced candidate, which
# calibrate.py sets per run; not logging, timeouts, files or addresses, which
# say nothing of the plan and would follow the record to other machines.
PLAN_SETTINGS = (
    "LANES_P2P_DISABLE", "LANES_SHM_DISABLE", "LANES_IB_DISABLE", "LANES_NLANES", "LANES_WIRE",
    "LANES_SHM_RING_BYTES", "LANES_SOCKET_RING_BYTES", "LANES_SOCKET_STRIPE_BYTES",
    "LANES_SOCKET_NTHREADS", "LANES_NSOCKS_PERTHREAD", "LANES_SOCKET_MOVER",
    "LANES_IB_RING_BYTES", "LANES_IB_SLOT_BYTES", "LANES_STAGE_CHUNK_BYTES", "LANES_STAGE_SLOTS",
    "LANES_STAGE_PAIR_CHUNK_BYTES", "LANES_STAGE_SHARED_STREAMS", "LANES_STAGED_COLLECTIVES",
    "LANES_SHARED_GPU_PROXY_BYTES", "LANES_HOST_SUM_THREADS", "LANES_LL_SHARED_GPU",
    "LANES_LL_MAX_BYTES", "LANES_SIMPLE_MAX_BYTES", "LANES_SHARED_CONTEXT_MAX_BYTES",
)


def run_env(env):
    """The plan-shaping settings a run measured under (LANES_P2P_DISABLE, the
    paths' limits, ...): a re-prediction must price the same set-up."""
    return {k: env[k] for k in PLAN_SETTINGS if k in env}


def repredict(args):
    """Predictions and choices of this build for OUT's stored points, under
    the LANES_* settings the run recorded (not the caller's)."""
    path = os.path.join(args.out, "calibration.json")
    with open(path) as f:
        doc = json.load(f)
    topology = args.topology or os.path.join(args.out, "topology.json")
    if not os.path.exists(topology):
        sys.exit(f"calibrate: {topology} not found: give the machine with --topology")
    topo = os.path.join(args.build, "bin", "lanes-topo")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANES_")}
    env.update(doc.get("env", {}))
    what_if = dict(kv.split("=", 1) for kv in args.env)
    env.update(what_if)
    key = KEY[doc["memory"]]
    plans = {}
    for p in doc["points"]:
        g = (p["collective"], p["nranks"], p.get("launch", doc.get("launch")))
        if g not in plans:
            cmd = [topo, "--plan", "--json", "--ranks", str(g[1]), "--collective", g[0],
                   "--topology", topology] + (["--threads"] if g[2] == "threads" else [])
            # The machine's MPS as the run saw it (an imported model has none).
            cmd.append("--mps" if (doc.get("inputs") or {}).get("mps") or doc.get("mps") else "--no-mps")
            text = run(cmd, env, "lanes-topo --plan --json")
            # A setting's warning (a bad --env value) may come before the JSON.
            plan = json.loads(text[text.find("{"):])
            plans[g] = {r["size"]: r for r in plan[doc["memory"]]}
            doc["inputs"] = plan.get("inputs", doc.get("inputs"))
        row = plans[g].get(p["size"])
        if row is None:
            continue
        predicted = {c[key]: c for c in row["candidates"]}
        p["chosen"] = row["chosen"]
        for c in p["candidates"]:
            new = predicted.get(name_of(c))
            if new is None:
                continue
            for k in ("predicted_us", "latency_us", "transfer_us", "reduce_us", "memory_us"):
                c[k] = new.get(k, 0)
            c["allowed"] = new.get("allowed", True)
        p["regret"] = p["default_us"] / best_allowed(p)
    doc["summary"] = summarize(doc["points"], doc.get("skipped"), doc.get("failed"))
    doc["repredicted_with"] = os.path.abspath(args.build)
    # A what-if is kept beside the run's own record, never in place of it.
    if what_if:
        doc["repredicted_env"] = what_if
    else:
        doc.pop("repredicted_env", None)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    plot(doc["points"], os.path.join(args.out, "calibration.png"))
    print_summary(doc["summary"])


def write(out, args, inputs, points, skipped, failed):
    summary = summarize(points, skipped, failed)
    with open(os.path.join(out, "calibration.json"), "w") as f:
        json.dump({"format": "lanes-calibration-1", "memory": args.memory, "launch": args.launch,
                   "env": run_env(os.environ), "inputs": inputs, "summary": summary,
                   "skipped": skipped, "failed": failed, "points": points}, f, indent=1)
    return summary


def print_summary(summary):
    """The summary as JSON, a key a line (a log's grep finds each)."""
    print("{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in summary.items()) + "\n}",
          flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--out", required=True)
    ap.add_argument("--memory", choices=["host", "device"], default="host",
                    help="host: host algorithms (LANES_ALGO); device: device paths (LANES_PROTO)")
    ap.add_argument("--launch", choices=["processes", "threads"], default="processes",
                    help="ranks as processes (lanes-run) or threads of one process (-t N)")
    ap.add_argument("--ranks", default="2,3,4")
    ap.add_argument("--collectives", default=",".join(TOOLS))
    ap.add_argument("--min", default="8", help="smallest size (nccl-tests' meaning), default 8")
    ap.add_argument("--max", default="1G", help="largest size (nccl-tests' meaning), default 1G")
    ap.add_argument("--repeat", type=int, default=3, help="runs per candidate, interleaved; default 3")
    ap.add_argument("--time-budget", type=float, default=None, metavar="SECONDS",
                    help="start no group that would end past SECONDS, stop runs at SECONDS")
    ap.add_argument("--no-probe", action="store_true", help="keep OUT/topo_cache.json as it is")
    ap.add_argument("--redraw", action="store_true",
                    help="recompute the summary and the plot from OUT/calibration.json and stop")
    ap.add_argument("--repredict", action="store_true",
                    help="ask this build's cost model again for OUT's points (OUT/topology.json "
                         "or --topology), rewrite OUT/calibration.json and the plot, and stop")
    ap.add_argument("--topology", help="with --repredict: the machine to predict for")
    ap.add_argument("--env", action="append", default=[], metavar="VAR=VALUE",
                    help="with --repredict: a setting over the run's recorded ones (what if; "
                         "the caller's own LANES_* are not read), repeatable")
    args = ap.parse_args()
    if args.env and not args.repredict:
        ap.error("--env applies to --repredict only")
    for kv in args.env:
        if not kv.startswith("LANES_") or "=" not in kv:
            ap.error(f"--env {kv}: give NAME=VALUE, NAME a LANES_ setting (an empty VALUE unsets it)")
    if args.repredict:
        repredict(args)
        return
    if args.redraw:
        path = os.path.join(args.out, "calibration.json")
        with open(path) as f:
            doc = json.load(f)
        passes_from_runs(args.out, doc["points"])
        doc["summary"] = summarize(doc["points"], doc.get("skipped"), doc.get("failed"))
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
        plot(doc["points"], os.path.join(args.out, "calibration.png"))
        print_summary(doc["summary"])
        return
    t0 = time.monotonic()
    deadline = None if args.time_budget is None else t0 + args.time_budget
    bindir = os.path.join(args.build, "bin")
    os.makedirs(args.out, exist_ok=True)
    scratch = os.path.join(args.out, "runs")
    os.makedirs(scratch, exist_ok=True)
    env = dict(os.environ)
    env["LANES_TOPO_CACHE"] = os.path.abspath(os.path.join(args.out, "topo_cache.json"))
    env.pop("LANES_ALGO", None)
    if args.memory == "device":
        env.pop("LANES_PROTO", None)
    topo = os.path.join(bindir, "lanes-topo")
    if not args.no_probe:
        try:
            print(run([topo, "--probe"], env, "lanes-topo --probe", deadline).splitlines()[0], flush=True)
        except Failed as e:
            sys.exit(f"calibrate: {e}")
        except OutOfTime:
            sys.exit(f"calibrate: lanes-topo --probe still running at the time budget ({args.time_budget:g} s)")
    min_bytes, max_bytes = size_arg(args.min), size_arg(args.max)
    key = KEY[args.memory]
    groups = [(int(n), coll) for n in args.ranks.split(",") for coll in args.collectives.split(",")]
    points, skipped, failed = [], [], []
    inputs = None
    longest = 0.0
    for gi, (nranks, coll) in enumerate(groups):
        now = time.monotonic()
        if deadline is not None and now + longest > deadline:
            skipped += [f"{c} x{n}" for n, c in groups[gi:]]
            print(f"calibrate: time budget ({args.time_budget:g} s): skipping {', '.join(skipped)}", flush=True)
            break
        cmd = [topo, "--plan", "--json", "--ranks", str(nranks), "--collective", coll]
        if args.launch == "threads":
            cmd.append("--threads")
        try:
            plan = json.loads(run(cmd, env, "lanes-topo --plan --json", deadline))
        except Failed as e:
            sys.exit(f"calibrate: {e}")
        except OutOfTime:
            skipped += [f"{c} x{n}" for n, c in groups[gi:]]
            break
        inputs = plan.get("inputs")
        if gi == 0:
            save_topology(topo, env, args.out, deadline)
        if not plan.get(args.memory):
            sys.exit(f"calibrate: lanes-topo --plan --json has no \"{args.memory}\" rows"
                     + (" (no GPU visible to it?)" if args.memory == "device" else ""))
        rows = {r["size"]: r for r in plan[args.memory] if min_bytes <= r["size"] <= max_bytes}
        if not rows:
            print(f"{coll} x {nranks} ranks: no planned size from {args.min} to {args.max}", flush=True)
            continue
        # Sizes where each candidate is one: a device path runs only over its own.
        where = {}
        for size, r in rows.items():
            for c in r["candidates"]:
                where.setdefault(c[key], []).append(size)
        names = sorted(where)
        where["default"] = list(rows)
        # Repetitions interleaved (every candidate, then again), each
        # point the fastest: the noise of a shared machine only adds time.
        measured, passes_us, passes, cut = {}, {}, 0, False
        for rep in range(args.repeat):
            for a in pass_order(names, rep):
                if a in measured and measured[a] is None:
                    continue  # failed before
                try:
                    got = measure(args, bindir, coll, nranks, a, min(where[a]), max(where[a]), env, scratch,
                                  rep, deadline)
                except Failed as e:
                    print(f"calibrate: {e}", file=sys.stderr, flush=True)
                    failed.append(f"{coll} x{nranks} {a}")
                    measured[a] = None
                    continue
                except OutOfTime:
                    cut = True
                    break
                for size, t in got.items():
                    old = measured.setdefault(a, {}).get(size)
                    if old is None or t["us"] < old["us"]:
                        measured[a][size] = t
                    passes_us.setdefault(a, {}).setdefault(size, []).append(t["us"])
            if cut:
                break
            passes += 1
        if passes == 0:
            skipped.append(f"{coll} x{nranks} (stopped by the time budget)")
        elif measured.get("default"):
            for size, r in sorted(rows.items()):
                predicted = {c[key]: c for c in r["candidates"]}
                forced = {a: measured[a][size]["us"] for a in predicted if measured.get(a) and size in measured[a]}
                if size not in measured["default"] or not forced:
                    continue
                best = min(v for a, v in forced.items() if predicted[a].get("allowed", True))
                points.append({
                    "collective": coll, "nranks": nranks, "size": size, "memory": args.memory,
                    "launch": args.launch, "chosen": r["chosen"],
                    "default_us": measured["default"][size]["us"],
                    "default_plan": measured["default"][size]["plan"],
                    "default_passes_us": passes_us["default"][size],
                    "regret": measured["default"][size]["us"] / best,
                    "candidates": [{"name": a, key: a, "measured_us": forced[a],
                                    "passes_us": passes_us[a][size],
                                    "allowed": predicted[a].get("allowed", True),
                                    "predicted_us": predicted[a]["predicted_us"],
                                    "latency_us": predicted[a]["latency_us"],
                                    "transfer_us": predicted[a]["transfer_us"],
                                    "reduce_us": predicted[a]["reduce_us"],
                                    "memory_us": predicted[a].get("memory_us", 0)} for a in forced],
                })
        took = time.monotonic() - now
        longest = max(longest, took)
        print(f"{coll} x {nranks} ranks ({args.memory}, {args.launch}): {len(rows)} sizes, "
              f"candidates {', '.join(names)}; {took:.0f} s"
              + (f", stopped by the time budget after {passes} pass(es)" if cut else ""), flush=True)
        write(args.out, args, inputs, points, skipped, failed)
        if cut:
            skipped += [f"{c} x{n}" for n, c in groups[gi + 1:]]
            break
    summary = write(args.out, args, inputs, points, skipped, failed)
    plot(points, os.path.join(args.out, "calibration.png"))
    print_summary(summary)
    if failed:
        sys.exit(1)


def repeatability(points):
    """How far one pass of the forced runs tells the next (points with each
    candidate's passes_us):
      - the one-pass oracle: per point and pass, the candidate fastest in that pass,
        its time over the best, both as the fastest of the other passes. A model
        that knew one pass exactly would score this; misses above it are noise
        between passes, not prices;
      - of the choice misses (the chosen candidate's forced run over 1.05x the best
        one's), those whose gap is no more than the larger run-to-run spread
        (slowest pass over fastest) of the two candidates."""
    oracle, misses, within = [], 0, 0
    for p in points:
        allowed = [c for c in p["candidates"] if c.get("allowed", True)]
        if len(allowed) < 2 or not all(c.get("passes_us") for c in allowed):
            continue
        n = min(len(c["passes_us"]) for c in allowed)
        if n < 2:
            continue  # one pass has no spread to measure
        for k in range(n):
            rest = [min(t for i, t in enumerate(c["passes_us"][:n]) if i != k) for c in allowed]
            pick = min(range(len(allowed)), key=lambda i: allowed[i]["passes_us"][k])
            oracle.append(rest[pick] / min(rest))
        chosen = [c for c in allowed if name_of(c) == p["chosen"]]
        if not chosen:
            continue
        best = min(allowed, key=lambda c: c["measured_us"])
        gap = chosen[0]["measured_us"] / best["measured_us"]
        if gap > 1.05:
            misses += 1
            spread = max(max(c["passes_us"]) / min(c["passes_us"]) for c in (chosen[0], best))
            within += gap <= spread
    return oracle, misses, within


def passes_from_runs(out, points):
    """Fills each candidate's passes_us, where missing, from the perf tools' files
    in OUT/runs (run_file's names). A run cut short ("complete": false, which measure()
    dropped) is left out, and a candidate whose passes there do not give its
    measured time (files of another calibration into the same OUT) is not filled."""
    runs = {}
    scratch = os.path.join(out, "runs")
    for f in sorted(os.listdir(scratch)) if os.path.isdir(scratch) else []:
        name = RUN_FILE.match(f)
        if not name:
            continue
        coll, nranks, candidate, _, rep = name.groups()
        with open(os.path.join(scratch, f)) as fh:
            doc = json.load(fh)
        if doc.get("complete") is False:
            continue
        for row in doc["results"]:
            # A run's cycles each give a row: the pass keeps its fastest, as measure() does.
            one = runs.setdefault((coll, int(nranks), candidate, row["size"]), {})
            one[int(rep)] = min(one.get(int(rep), 1e30), row["out_of_place"]["time"])
    for p in points:
        for c in p["candidates"]:
            got = runs.get((p["collective"], p["nranks"], name_of(c), p["size"]))
            if got and not c.get("passes_us") and min(got.values()) == c["measured_us"]:
                c["passes_us"] = [got[r] for r in sorted(got)]


def summarize(points, skipped=None, failed=None):
    """Prediction error per candidate (algorithm or path); the default's regret as run,
    and as chosen: the forced run of the candidate the default picks over the best
    forced one (the same runs, so the noise between separate runs of one candidate
    drops out). Groups skipped for time and runs that failed, when there are any."""
    errors = {}
    for p in points:
        for c in p["candidates"]:
            errors.setdefault(name_of(c), []).append(abs(c["predicted_us"] - c["measured_us"]) / c["measured_us"])
    regrets = [p["regret"] for p in points]
    regrets_any = [p["default_us"] / min(c["measured_us"] for c in p["candidates"]) for p in points]
    chosen = []
    for p in points:
        forced = {name_of(c): c["measured_us"] for c in p["candidates"]}
        if p["chosen"] in forced:
            chosen.append(forced[p["chosen"]] / best_allowed(p))
    share = lambda rs: round(sum(r <= 1.05 for r in rs) / len(rs), 3) if rs else None
    oracle, misses, within = repeatability(points)
    summary = {
        "points": len(points),
        "median_error_by_algo": {a: round(statistics.median(e), 3) for a, e in sorted(errors.items())},
        "regret_within_1_05": share(regrets),
        "regret_max": round(max(regrets), 3) if regrets else None,
        "regret_median": round(statistics.median(regrets), 3) if regrets else None,
        "regret_any_within_1_05": share(regrets_any),
        "regret_any_max": round(max(regrets_any), 3) if regrets_any else None,
        "choice_regret_within_1_05": share(chosen),
        "choice_regret_max": round(max(chosen), 3) if chosen else None,
    }
    if oracle:
        summary["choice_regret_one_pass_oracle_within_1_05"] = share(oracle)
        summary["choice_regret_misses_within_spread"] = f"{within} of {misses}"
    if skipped:
        summary["skipped_groups"] = skipped
    if failed:
        summary["failed_runs"] = failed
    return summary


def plot(points, path):
    if not points:
        return
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("calibrate: no matplotlib (Debian: python3-matplotlib): no plot", file=sys.stderr)
        return
    kinds = sorted({(p.get("memory", "host"), p.get("launch", "processes")) for p in points})
    what = " and ".join(f"{m.capitalize()}" for m in sorted({m for m, _ in kinds}))
    how = " and ".join(sorted({launch for _, launch in kinds}))
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 5.5))
    by_name = {}
    for p in points:
        for c in p["candidates"]:
            by_name.setdefault(name_of(c), []).append((c["measured_us"], c["predicted_us"]))
    for name, xy in sorted(by_name.items()):
        a.scatter([x for x, _ in xy], [y for _, y in xy], s=12, label=name)
    lo = min(min(x, y) for xy in by_name.values() for x, y in xy)
    hi = max(max(x, y) for xy in by_name.values() for x, y in xy)
    a.plot([lo, hi], [lo, hi], "k--", lw=0.8)
    a.set(xscale="log", yscale="log", xlabel="measured (us)", ylabel="predicted (us)",
          title=f"{what} cost model ({how}): predicted against measured")
    a.legend()
    for k in sorted({(p["collective"], p["nranks"]) for p in points}):
        pts = [p for p in points if (p["collective"], p["nranks"]) == k]
        b.plot([p["size"] for p in pts], [p["regret"] for p in pts], marker=".", lw=0.8,
               label=f"{k[0]} x{k[1]}")
    b.axhline(1.05, color="k", ls="--", lw=0.8)
    b.set(xscale="log", xlabel="size (bytes)", ylabel="default / best forced",
          title=f"The default's regret, {what.lower()} memory ({how})")
    b.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
