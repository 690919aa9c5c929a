#!/usr/bin/env python3
"""The include order of the library's folders (docs/architecture.md, "Layers").

Every folder may include only folders of a lower layer:

    include (lanes.h) < base, mpi_plugin < bootstrap, observe < transport, topology, kernels
      < algorithms < exec < planner < core < compat, tools

Folders of one layer do not include each other. Fails, naming file, line and
both layers, on an include that breaks the order. `--graph` prints which
folder includes which, with counts.

Usage: check_layers.py SOURCE_DIR [--graph]
"""
import collections
import os
import re
import sys

LAYERS = [
    ["include"],
    ["base", "mpi_plugin"],
    ["bootstrap", "observe"],
    ["transport", "topology", "kernels"],
    ["algorithms"],
    ["exec"],
    ["planner"],
    ["core"],
    ["compat", "tools"],
]
RANK = {folder: i for i, layer in enumerate(LAYERS) for folder in layer}

SOURCE = re.compile(r"\.(cc|h|cu|cuh|c)$")
INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"')


def folder_of_file(rel):
    parts = rel.split("/")
    if parts[0] == "src":
        return parts[1]
    return parts[0]  # include, transport, topology, kernels


def folder_of_include(path):
    top = path.split("/")[0]
    return "include" if top == "lanes" else top


def main():
    root = sys.argv[1]
    graph = collections.Counter()
    errors = []
    for top in ["include", "src", "transport", "topology", "kernels"]:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not SOURCE.search(name):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                src = folder_of_file(rel)
                if src not in RANK:
                    errors.append(f"{rel}: folder {src} has no layer; add it to LAYERS")
                    continue
                with open(path, errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m or "/" not in m.group(1):
                            continue
                        dst = folder_of_include(m.group(1))
                        if dst == src or dst not in RANK:
                            continue
                        graph[(src, dst)] += 1
                        if RANK[dst] < RANK[src]:
                            continue
                        how = "the same layer" if RANK[dst] == RANK[src] else "a higher layer"
                        errors.append(f"{rel}:{lineno}: {src} includes {m.group(1)}, from {how} "
                                      f"({dst}); {src} may include only {below(src)}")
    if "--graph" in sys.argv:
        for (src, dst), n in sorted(graph.items(), key=lambda e: (RANK[e[0][0]], e[0])):
            print(f"{src:11s} -> {dst:11s} {n:3d}")
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        print(f"{len(errors)} include(s) break the layer order", file=sys.stderr)
        return 1
    print(f"layer order holds ({sum(graph.values())} includes across folders)")
    return 0


def below(folder):
    lower = [f for layer in LAYERS[: RANK[folder]] for f in layer]
    return ", ".join(lower) if lower else "nothing"


if __name__ == "__main__":
    sys.exit(main())
