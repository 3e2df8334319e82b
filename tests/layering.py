#!/usr/bin/env python3
"""The module layering of libmerak.a, from its objects' symbols (nm) and
its sources' includes.

Each folder under src/, and sim/, is a module; libmerak's objects (the
members of .libs/libmerak.a) are counted, not the CUDA module's (src/cuda/
is its own shared object, linked with -z defs against nothing of ours).
Module A depends on module B when an object of A uses a symbol an object
of B defines.  Checked:
  - the module graph has no cycle (a lower layer never calls a higher one);
  - the executor (exec/, cpu/, backend/, cuda/) uses nothing of the
    simulator (sim/, planner/): both engines meet in sched/ and plan/ only;
  - inside the graph module the files form no cycle (dtype.c is its base);
  - a module's own headers (src/M/*.h, sim/*.h) are private to it: another
    module includes only include/merak/ (every module's interface; the
    Makefile installs the public subset);
  - only the CLI prints: no library object outside cli/ references stdout,
    stderr, printf, puts, putchar, perror or vprintf (lines go to mk_log).
Exit 77 (skip) when nm or the objects are missing."""
import collections
import glob
import re
import os
import shutil
import subprocess
import sys

ENGINE = ("exec", "cpu", "backend", "cuda")
FORBIDDEN = {(e, s) for e in ENGINE for s in ("sim", "planner")}
ACYCLIC_FILES_IN = {"graph"}
MODULE_DIRS = ("src/*", "sim")
PRINTING = {"stdout", "stderr", "printf", "puts", "putchar", "perror", "vprintf"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"/]+)/[^"]+"', re.M)


def module_of(path):
    d = os.path.dirname(path)
    return os.path.basename(d)


def private_includes(top):
    """Lines 'file: includes M/x.h' where M is another module's folder."""
    modules = {os.path.basename(d) for g in MODULE_DIRS for d in glob.glob(os.path.join(top, g))
               if os.path.isdir(d)}
    bad = []
    for g in MODULE_DIRS:
        for f in sorted(glob.glob(os.path.join(top, g, "*.[ch]")) + glob.glob(os.path.join(top, g, "*.cu*"))):
            own = module_of(f)
            for m in INCLUDE.finditer(open(f, encoding="utf-8", errors="replace").read()):
                if m.group(1) in modules and m.group(1) != own:
                    header = m.group(0).split('"')[1]
                    bad.append(f"{os.path.relpath(f, top)}: includes {header}, "
                               f"private to {m.group(1)}/ (use include/merak/)")
    return bad


def self_test():
    """The include rule can fail: a fake tree with one violation."""
    import tempfile
    with tempfile.TemporaryDirectory() as t:
        for d in ("src/a", "src/b", "sim"):
            os.makedirs(os.path.join(t, d))
        open(os.path.join(t, "src/b/y.h"), "w").write("")
        open(os.path.join(t, "src/a/x.c"), "w").write('#include "b/y.h"\n#include "a/z.h"\n#include "merak/q.h"\n')
        open(os.path.join(t, "sim/s.c"), "w").write('#include "a/z.h"\n')
        got = private_includes(t)
    return len(got) == 2 and "src/a/x.c: includes b/y.h" in got[0] and "sim/s.c" in got[1]


def library_objects(build):
    """The .o files under the module folders that libmerak.a holds."""
    members = None
    ar = os.path.join(build, ".libs", "libmerak.a")
    if shutil.which("ar") and os.path.exists(ar):
        members = set(subprocess.run(["ar", "t", ar], capture_output=True, text=True).stdout.split())
    objs = [o for d in MODULE_DIRS for o in glob.glob(os.path.join(build, d, "*.o"))
            if not os.path.basename(o).startswith("tests_")]
    return [o for o in objs if members is None or os.path.basename(o) in members]


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
    objs = library_objects(build)
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
    for o in sorted(objs):
        prints = sorted(uses[o] & PRINTING)
        if prints and module(o) != "cli":
            print(f"{os.path.relpath(o, build)} prints ({', '.join(prints)}): the library reports through mk_log")
            bad = 1
    if not self_test():
        print("the include check's self-test failed: it would not catch a private include")
        bad = 1
    for line in private_includes(os.environ.get("top_srcdir", ".")):
        print(line)
        bad = 1
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
