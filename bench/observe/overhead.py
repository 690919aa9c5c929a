"""What watching a job costs: the 8 B and 256 MiB all-reduce with every
observer off, with the default (the flight recorder alone), with metrics only,
and with everything on (flight recorder, metrics served over HTTP and written
to a file, trace file, NVTX ranges seen by a tool), measured side by side: the configurations take turns, round after round, and each
cell is the median of its rounds.

Usage: overhead.py BUILD_DIR [--ranks N] [--rounds R] [--device] [--out FILE]
  BUILD_DIR   a build with bin/lanes-run, bin/lanes_all_reduce_perf and,
              for NVTX, lib/liblanes_nvtx_recorder.so (the tests' NVTX tool)
  --device    device buffers, ranks as threads of one process (-t), GPU r %
              visible GPUs; else host buffers, ranks as processes (lanes-run)
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

SIZES = {"8 B": ("8", "20000", "2000"), "256 MiB": ("256M", "8", "2")}


def configs(tmp, build):
    recorder = os.path.join(build, "lib", "liblanes_nvtx_recorder.so")
    everything = {
        "LANES_METRICS": "http=0,file=%s/metrics-%%r.prom,interval=1" % tmp,
        "LANES_TRACE_FILE": "%s/trace" % tmp,
    }
    if os.path.exists(recorder):
        everything["NVTX_INJECTION64_PATH"] = recorder
        everything["LANES_NVTX_RECORD_FILE"] = "%s/nvtx.txt" % tmp
    return [
        ("off", {"LANES_FLIGHT_RECORDER": "0"}),
        ("default (flight recorder)", {}),
        ("metrics only", {"LANES_FLIGHT_RECORDER": "0",
                          "LANES_METRICS": "http=0,file=%s/m-%%r.prom" % tmp}),
        ("everything on", everything),
    ]


def run_once(build, ranks, size, env_extra, device):
    b, iters, warmup = SIZES[size]
    perf = [os.path.join(build, "bin", "lanes_all_reduce_perf"), "-b", b, "-e", b,
            "-n", iters, "-w", warmup, "-c", "0"]
    if device:  # ranks as threads, GPU r % visible GPUs (all on one GPU with one)
        cmd = perf + ["-t", str(ranks), "--memory", "device"]
    else:
        cmd = [os.path.join(build, "bin", "lanes-run"), "-n", str(ranks)] + perf + [
            "--memory", "host"]
    env = dict(os.environ)
    env.update(env_extra)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError("%s failed:\n%s%s" % (" ".join(cmd), out.stdout, out.stderr))
    for line in out.stdout.splitlines():
        f = line.split()
        if len(f) >= 10 and f[0].isdigit():
            return float(f[5]), float(f[9])  # out-of-place, in-place time (us)
    raise RuntimeError("no result row in:\n" + out.stdout)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("build")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--device", action="store_true")
    p.add_argument("--out")
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="lanes-overhead-") as tmp:
        cfgs = configs(tmp, a.build)
        times = {(s, c): [] for s in SIZES for c, _ in cfgs}
        for r in range(a.rounds):
            for size in SIZES:
                # Each round starts with a different configuration.
                order = cfgs[r % len(cfgs):] + cfgs[:r % len(cfgs)]
                for name, env in order:
                    oop, ip = run_once(a.build, a.ranks, size, env, a.device)
                    times[(size, name)].append(min(oop, ip))
        memory = "device" if a.device else "host"
        lines = ["all-reduce, %d ranks, %s buffers: median of %d rounds (us; each round the "
                 "better of out-of-place and in-place)" % (a.ranks, memory, a.rounds), "",
                 "| configuration | " + " | ".join(SIZES) + " | " +
                 " | ".join("%s vs off" % s for s in SIZES) + " |",
                 "|---|" + "---|" * (2 * len(SIZES))]
        off = {s: statistics.median(times[(s, "off")]) for s in SIZES}
        for name, env in cfgs:
            med = {s: statistics.median(times[(s, name)]) for s in SIZES}
            cells = ["%.2f" % med[s] for s in SIZES]
            deltas = ["%+.2f us (%.3fx)" % (med[s] - off[s], med[s] / off[s]) for s in SIZES]
            lines.append("| %s | %s | %s |" % (name, " | ".join(cells), " | ".join(deltas)))
        lines.append("")
        lines.append("everything on: " + ", ".join("%s=%s" % kv for kv in cfgs[-1][1].items()
                                                  if kv[0] != "LANES_NVTX_RECORD_FILE"))
        lines.append("rounds (us): " + "; ".join(
            "%s/%s: %s" % (s, c, " ".join("%.2f" % t for t in times[(s, c)]))
            for s in SIZES for c, _ in cfgs))
        text = "\n".join(lines) + "\n"
        print(text)
        if a.out:
            with open(a.out, "w") as f:
                f.write(text)


if __name__ == "__main__":
    sys.exit(main())
