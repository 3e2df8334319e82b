#!/usr/bin/env python3
# Usage: python3 tests/golden/plan_diff.py OLD.jsonl.gz NEW.jsonl.gz
# Compare two plan golden files case by case, every field but the search's
# counters that issue 22's lazy search redefined (evaluated) or added;
# --counts: also `simulated`.
import gzip, json, sys
IGN = {"evaluated", "settled", "over_memory", "duplicates", "pruned_by_bound", "search_time_s"}
if "--counts" in sys.argv:  # also the simulated count (a tighter bound simulates fewer)
    sys.argv.remove("--counts")
    IGN.add("simulated")
def load(f):
    return {d["case"]: d for d in map(json.loads, gzip.open(f, "rt"))}
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a.keys() == b.keys(), "case lists differ"
same = 0
for k in a:
    x, y = a[k], b[k]
    for d in (x, y):
        if isinstance(d.get("json"), dict):
            d["json"] = {f: v for f, v in d["json"].items() if f not in IGN}
    if x == y: same += 1
    else: print("DIFFERS:", k)
print("%d of %d cases identical outside %s" % (same, len(a), sorted(IGN)))
