#!/usr/bin/env python3
"""Proof for a memory-model re-recording: compare an old and a new golden
file case by case and count what changed, split into memory fields and
everything else (times, bubbles, events, streams, plans, rc, stderr).

  memory_diff.py OLD.jsonl.gz NEW.jsonl.gz

Memory fields: peak_memory_bytes, memory_breakdown, fits, worst_stage, memory_limit_bytes,
shortfall_bytes (at any depth), stderr lines saying a plan does not fit,
and GiB figures in stderr.  Every other leaf must be equal (reals to 1e-12 relative, as
golden.py compares them).  Prints the counts; exit 1 if any non-memory
field changed (listing the first ones)."""
import gzip
import json
import re
import sys

MEMORY = {"peak_memory_bytes", "memory_breakdown", "fits", "worst_stage", "shortfall_bytes", "memory_limit_bytes"}
REL_TOL = 1e-12


def leaves(a, b, path):
    """(path, golden, now) for every leaf that differs."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            yield from leaves(a.get(k), b.get(k), path + [k])
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            yield from leaves(x, y, path + [i])
    elif isinstance(a, float) and isinstance(b, float) and not isinstance(a, bool):
        if abs(a - b) > REL_TOL * max(abs(a), abs(b)):
            yield path, a, b
    elif a != b or type(a) != type(b):
        yield path, a, b


def stderr_rest(text):
    """stderr without its memory figures: a "does not fit" warning goes (it
    follows `fits`), GiB figures elsewhere (merak plan's "needs X GiB
    more") are masked."""
    lines = [l for l in (text or "").split("\n") if "does not fit" not in l]
    return "\n".join(re.sub(r"[0-9.]+ GiB", "# GiB", l) for l in lines)


def main(old_path, new_path):
    old = [json.loads(l) for l in gzip.open(old_path, "rt")]
    new = [json.loads(l) for l in gzip.open(new_path, "rt")]
    if [r["case"] for r in old] != [r["case"] for r in new]:
        sys.exit("the two files hold different case lists")
    n_mem_cases = n_other_cases = n_mem_fields = n_other_fields = 0
    shown = 0
    for o, n in zip(old, new):
        mem = other = 0
        for path, a, b in leaves({k: v for k, v in o.items() if k != "stderr"},
                                 {k: v for k, v in n.items() if k != "stderr"}, []):
            if any(p in MEMORY for p in path if isinstance(p, str)):
                mem += 1
            else:
                other += 1
                if shown < 20:
                    shown += 1
                    print("NON-MEMORY: %s: %s: %r -> %r" % (o["case"], ".".join(map(str, path)), a, b))
        if stderr_rest(o.get("stderr")) != stderr_rest(n.get("stderr")):
            other += 1
            if shown < 20:
                shown += 1
                print("NON-MEMORY stderr: %s" % o["case"])
        elif (o.get("stderr") or "") != (n.get("stderr") or ""):
            mem += 1
        n_mem_fields += mem
        n_other_fields += other
        n_mem_cases += mem > 0
        n_other_cases += other > 0
    print("%s: %d cases; %d with memory fields changed (%d fields); %d with other fields changed (%d fields)"
          % (new_path, len(old), n_mem_cases, n_mem_fields, n_other_cases, n_other_fields))
    return 1 if n_other_fields else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
