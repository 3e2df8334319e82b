#!/usr/bin/env python3
"""Where the replay misses: signed error and MAPE of replay.csv's rows by columns.

usage: breakdown.py [--csv results/replay.csv] [--group PREFIX] [--by COL[,COL...]] [--fit]

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

--fit decomposes instead, for the rows without pipeline parallelism (pp 1)
of each group: a step of m micro-batches (global batch / (dp x micro-
batch)) of a model of L layers is fitted, measured and predicted alike, by
least squares as  t = m (a + b L) + (c + d L):  a, the time a micro-batch
spends outside the layers (embedding, LM head, loss, their kernels' host
time); b, a layer's per micro-batch; c and d, what a step pays once
(optimizer, gradient reduction) and per layer.  A group needs rows at 4
independent (m, L) points (a sweep over layers and batch sizes, as
vTrain's single-node one); others are listed as not fitted.  Where a and b
disagree in opposite directions, a per-micro-batch cost is standing in
for a per-layer one.  Group by hidden,tp,mbs for vTrain's sweeps.
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


def solve(A, y):
    """Least squares x of A x = y (normal equations, Gaussian elimination
    with partial pivoting); None when A's columns are dependent."""
    n = len(A[0])
    M = [[sum(r[i] * r[j] for r in A) for j in range(n)] + [sum(r[i] * v for r, v in zip(A, y))] for i in range(n)]
    for i in range(n):
        p = max(range(i, n), key=lambda k: abs(M[k][i]))
        if abs(M[p][i]) < 1e-9 * max(1.0, max(abs(v) for row in M for v in row[:n])):
            return None
        M[i], M[p] = M[p], M[i]
        for k in range(n):
            if k != i:
                f = M[k][i] / M[i][i]
                M[k] = [a - f * b for a, b in zip(M[k], M[i])]
    return [M[i][n] / M[i][i] for i in range(n)]


def fit_point(r):
    """(m, L) of a replayed row: micro-batches a step, layers."""
    flags = r.get("flags", "").split()
    gbs = int(flags[flags.index("--gbs") + 1]) if "--gbs" in flags else 0
    m = gbs // (int(r["dp"]) * int(r["mbs"])) if gbs else 0
    return m, int(column(r, "layers"))


def print_fits(groups, cols, width):
    print("  ".join(c.rjust(w) for c, w in zip(cols, width)) +
          "   rows | measured: a ms  b ms  c ms  d ms | predicted: a ms  b ms  c ms  d ms")
    for k in sorted(groups, key=lambda k: [sort_key(v) for v in k]):
        pts = groups[k]
        A = [[m, m * L, 1.0, L] for m, L, _, _ in pts]
        xm, xp = solve(A, [t for _, _, t, _ in pts]), solve(A, [t for _, _, _, t in pts])
        head = "  ".join(v.rjust(w) for v, w in zip(k, width)) + "  %5d" % len(pts)
        if xm is None or xp is None:
            print(head + " | not fitted: fewer than 4 independent (micro-batches, layers) points")
            continue
        print(head + " | %8.2f %5.2f %5.2f %5.2f | %9.2f %5.2f %5.2f %5.2f" %
              tuple(1e3 * v for v in xm + xp))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--csv", default=os.path.join(here, "results", "replay.csv"))
    ap.add_argument("--group", default="", help="keep rows whose id starts with this")
    ap.add_argument("--by", default="tp,pp", help="comma-separated columns")
    ap.add_argument("--fit", action="store_true", help="per group: t = m (a + b L) + (c + d L) over the pp-1 rows")
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
        if a.fit and r["pp"] != "1":
            continue
        m, L = fit_point(r) if a.fit else (0, 0)
        if a.fit and m <= 0:
            die("row %s: no --gbs in its flags to count its micro-batches" % r["row"])
        v = (m, L, float(r["measured_s"]), float(r["predicted_s"])) if a.fit else 100 * float(r["error"])
        groups.setdefault(tuple(column(r, c) for c in cols), []).append(v)
    if not groups:
        die("no rows without pipeline parallelism to fit")
    width = [max(len(c), *(len(k[i]) for k in groups)) for i, c in enumerate(cols)]
    if a.fit:
        print_fits(groups, cols, width)
        return 0
    print("  ".join(c.rjust(w) for c, w in zip(cols, width)) + "   rows  mean err %  MAPE %")
    for k in sorted(groups, key=lambda k: [sort_key(v) for v in k]):
        e = groups[k]
        print("  ".join(v.rjust(w) for v, w in zip(k, width)) +
              "  %5d  %+9.1f  %6.1f" % (len(e), statistics.mean(e), statistics.mean(abs(x) for x in e)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
