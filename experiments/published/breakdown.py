#!/usr/bin/env python3
"""Where the replay misses: signed error and MAPE of replay.csv's rows by columns.

usage: breakdown.py [--csv results/replay.csv] [--group PREFIX] [--by COL[,COL...]]

Reads run.sh's results/replay.csv (one row per replayed run: its layout,
schedule, recompute and the signed error (predicted - measured) /
measured) and prints, for every value of the --by columns (default
tp,pp), the rows, the mean signed error and the MAPE, in percent.  A
systematic trend along a column (say, the error falling as pp grows at
every tp) points at physics a layout exercises, where row-by-row noise
does not.  --group keeps the rows whose id starts with PREFIX
(single-node, multi-node, nemo-summary, ...).  Columns: those of the CSV
header (dp, pp, tp, cp, mbs, schedule, recompute, sp, zero, model,
source, gpus), model also as `hidden` (its second field) or `layers`.
Exit 2 with one line on a missing file, column or empty selection.
"""
import argparse
import csv
import os
import statistics
import sys


def die(msg):
    print("breakdown.py: " + msg, file=sys.stderr)
    sys.exit(2)


def column(row, name):
    if name in ("hidden", "layers"):
        parts = row["model"].split("x")
        return parts[1 if name == "hidden" else 0] if len(parts) == 2 else row["model"]
    return row[name]


def sort_key(value):
    return (0, float(value), "") if value.replace(".", "", 1).isdigit() else (1, 0.0, value)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--csv", default=os.path.join(here, "results", "replay.csv"))
    ap.add_argument("--group", default="", help="keep rows whose id starts with this")
    ap.add_argument("--by", default="tp,pp", help="comma-separated columns")
    a = ap.parse_args()
    try:
        with open(a.csv, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        die("cannot read %s: %s (run run.sh first)" % (a.csv, e.strerror))
    rows = [r for r in rows if r["row"].startswith(a.group) and r.get("error")]
    if not rows:
        die("no replayed rows" + (" in group " + a.group if a.group else ""))
    cols = [c for c in a.by.split(",") if c]
    known = set(rows[0]) | {"hidden", "layers"}
    bad = [c for c in cols if c not in known]
    if bad or not cols:
        die("unknown column %s (known: %s)" % (",".join(bad) or "(none)", ", ".join(sorted(known))))
    groups = {}
    for r in rows:
        groups.setdefault(tuple(column(r, c) for c in cols), []).append(100 * float(r["error"]))
    width = [max(len(c), *(len(k[i]) for k in groups)) for i, c in enumerate(cols)]
    print("  ".join(c.rjust(w) for c, w in zip(cols, width)) + "   rows  mean err %  MAPE %")
    for k in sorted(groups, key=lambda k: [sort_key(v) for v in k]):
        e = groups[k]
        print("  ".join(v.rjust(w) for v, w in zip(k, width)) +
              "  %5d  %+9.1f  %6.1f" % (len(e), statistics.mean(e), statistics.mean(abs(x) for x in e)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
