"""Rooted calls of 4 processes, host memory, 8 B-8 KiB: the default against
LANES_ALGO=direct and LANES_ALGO=direct,shared_sum (which makes the host-summation
arena at init, as the default does), four rounds, the order turning each round.

    python3 arena_ab.py BIN_DIR TOPO_CACHE SCRATCH_DIR
"""
import json
import os
import statistics
import subprocess
import sys

VARIANTS = ["default", "direct", "direct,shared_sum"]


def main():
    bindir, cache, scratch = sys.argv[1:4]
    times = {}
    for r in range(4):
        for v in VARIANTS[r % 3:] + VARIANTS[:r % 3]:
            for coll in ("broadcast", "reduce"):
                env = dict(os.environ, LANES_TOPO_CACHE=cache)
                if v != "default":
                    env["LANES_ALGO"] = v
                out = os.path.join(scratch, f"a_{coll}_{r}.json")
                subprocess.run([os.path.join(bindir, "lanes-run"), "-n", "4",
                                os.path.join(bindir, f"lanes_{coll}_perf"), "--memory", "host",
                                "-b", "8", "-e", "8192", "-f", "4", "-n", "100", "-w", "5", "-N", "5",
                                "-c", "0", "-J", out], env=env, check=True, stdout=subprocess.DEVNULL)
                with open(out) as f:
                    for row in json.load(f)["results"]:
                        times.setdefault((coll, row["size"]), {}).setdefault(v, []).append(
                            row["out_of_place"]["time"])
                os.remove(out)
    print("coll size | median us over 4 rounds: default direct direct,shared_sum | forced/default")
    for (coll, size), t in sorted(times.items()):
        m = [statistics.median(t[v]) for v in VARIANTS]
        print(f"{coll} {size} | {m[0]:.2f} {m[1]:.2f} {m[2]:.2f} | {m[1] / m[0]:.2f} {m[2] / m[0]:.2f}")


if __name__ == "__main__":
    main()
