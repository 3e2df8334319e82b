#!/usr/bin/env python3
"""The module layering of libmerak.a, from its objects' symbols (nm).

Each folder under src/ is a module.  Module A depends on module B when an
object of A uses a symbol an object of B defines.  Checked:
  - the module graph has no cycle (a lower layer never calls a higher one);
  - the executor (exec/, cuda/) uses nothing of the simulator (sim/,
    planner/): both engines meet in sched/ and plan/ only;
  - inside the graph module the files form no cycle (dtype.c is its base).
Exit 77 (skip) when nm or the objects are missing."""
import collections
import glob
import os
import shutil
import subprocess
import sys

FORBIDDEN = {("exec", "sim"), ("exec", "planner"), ("cuda", "sim"), ("cuda", "planner")}
ACYCLIC_FILES_IN = {"graph"}


def symbols(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "TDBRC":
            defined.add(f[2])
        elif len(f) == 2 and f[0] == "U":
            used.add(f[1])
    return defined, used


def find_cycle(graph):
    """One cycle as a list of nodes, or None (iterative colouring DFS)."""
    colour = {}
    for root in sorted(graph):
        if colour.get(root):
            continue
        stack = [(root, iter(sorted(graph[root])))]
        path = [root]
        colour[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                colour[node] = 2
                stack.pop()
                path.pop()
            elif colour.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not colour.get(nxt):
                colour[nxt] = 1
                path.append(nxt)
                stack.append((nxt, iter(sorted(graph.get(nxt, ())))))
    return None


def main():
    build = os.environ.get("top_builddir", ".")
    objs = [o for d in ("src/*", "sim") for o in glob.glob(os.path.join(build, d, "*.o"))
            if not os.path.basename(o).startswith("tests_")]
    if not shutil.which("nm") or not objs:
        print("skip: no nm or no objects under src/*/ and sim/")
        return 77
    defs, uses = {}, {}
    for o in objs:
        defs[o], uses[o] = symbols(o)
    owner = {s: o for o, d in defs.items() for s in d}
    module = lambda o: os.path.basename(os.path.dirname(o))
    files, modules = collections.defaultdict(set), collections.defaultdict(set)
    for o, used in uses.items():
        for s in used:
            w = owner.get(s)
            if w is None or w == o:
                continue
            files[o].add(w)
            if module(o) != module(w):
                modules[module(o)].add(module(w))
    bad = 0
    cyc = find_cycle(modules)
    if cyc:
        print("module cycle: " + " -> ".join(cyc))
        bad = 1
    for a, b in sorted(FORBIDDEN):
        if b in modules.get(a, ()):
            users = sorted({os.path.basename(o) for o in files if module(o) == a
                            for w in files[o] if module(w) == b})
            print(f"{a}/ uses {b}/ ({', '.join(users)})")
            bad = 1
    for m in sorted(ACYCLIC_FILES_IN):
        sub = {o: {w for w in ws if module(w) == m} for o, ws in files.items() if module(o) == m}
        cyc = find_cycle(sub)
        if cyc:
            print(f"file cycle in {m}/: " + " -> ".join(os.path.basename(c) for c in cyc))
            bad = 1
    for m in sorted(modules):
        print(f"{m} -> {' '.join(sorted(modules[m]))}")
    return bad


if __name__ == "__main__":
    sys.exit(main())
