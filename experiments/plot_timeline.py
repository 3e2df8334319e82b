#!/usr/bin/env python3
"""Per-rank Gantt chart of a Merak trace (Chrome Trace Event JSON, as
written by `merak sim --trace` and `merak run --trace`).

    plot_timeline.py TRACE -o out.png [--overlay TRACE2] [--max-ranks N]

One row per (rank, stream) that has events; bars coloured by instruction
kind.  --overlay draws a second trace (e.g. the measured run of a
predicted one) as black outlines in the same rows, for predicted vs
measured."""
import argparse
import json
import re
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

STREAMS = {0: "compute", 1: "p2p", 2: "tp", 3: "dp"}
COLOURS = [
    ("F_PRE", "#9ecae1"), ("F", "#3182bd"), ("R", "#fd8d3c"), ("B_IN", "#31a354"),
    ("B_W", "#a1d99b"), ("B", "#006d2c"), ("SEND", "#969696"), ("RECV", "#e7e7e7"),
    ("AR.tp", "#9e9ac8"), ("RS+AG.tp", "#9e9ac8"), ("AR.tied", "#e377c2"), ("dp", "#d62728"),
    ("OPT", "#8c564b"), ("LOAD", "#bcbd22"),
]


def kind(name):
    if name.endswith(".dp"):
        return "dp"
    for k, _ in COLOURS:
        if k in ("F", "R", "B"):
            if re.fullmatch(k + r"\d*", name):
                return k
        elif name.startswith(k):
            return k
    return "other"


def load(path):
    with open(path) as f:
        d = json.load(f)
    ev = d["traceEvents"] if isinstance(d, dict) else d
    return [e for e in ev if e.get("ph") == "X"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--overlay")
    ap.add_argument("--max-ranks", type=int, default=64)
    ap.add_argument("--title")
    a = ap.parse_args()
    ev = load(a.trace)
    ov = load(a.overlay) if a.overlay else []
    if not ev:
        sys.exit("plot_timeline: no complete events in %s" % a.trace)
    ranks = sorted({e["pid"] for e in ev})[: a.max_ranks]
    rows = sorted({(e["pid"], e.get("tid", 0)) for e in ev + ov if e["pid"] in ranks})
    index = {r: i for i, r in enumerate(rows)}
    colour = dict(COLOURS)
    t0 = min(e["ts"] for e in ev + ov)
    fig, ax = plt.subplots(figsize=(14, max(2.5, 0.32 * len(rows) + 1.2)))
    for k in [c for c, _ in COLOURS] + ["other"]:
        sel = [e for e in ev if (e["pid"], e.get("tid", 0)) in index and kind(e["name"]) == k]
        if not sel:
            continue
        for r in {(e["pid"], e.get("tid", 0)) for e in sel}:
            bars = [((e["ts"] - t0) / 1e3, max(e["dur"], 0) / 1e3) for e in sel if (e["pid"], e.get("tid", 0)) == r]
            ax.broken_barh(bars, (index[r] - 0.4, 0.8), facecolors=colour.get(k, "#cccccc"), linewidth=0)
    for r in {(e["pid"], e.get("tid", 0)) for e in ov if (e["pid"], e.get("tid", 0)) in index}:
        bars = [((e["ts"] - t0) / 1e3, max(e["dur"], 0) / 1e3) for e in ov if (e["pid"], e.get("tid", 0)) == r]
        ax.broken_barh(bars, (index[r] - 0.45, 0.9), facecolors="none", edgecolors="black", linewidth=0.6)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(["rank %d %s" % (p, STREAMS.get(t, t)) for p, t in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    ax.set_title(a.title or a.trace + (" (outlines: %s)" % a.overlay if a.overlay else ""), fontsize=9)
    used = {kind(e["name"]) for e in ev}
    ax.legend(handles=[Patch(color=c, label=k) for k, c in COLOURS if k in used],
              loc="upper center", bbox_to_anchor=(0.5, -0.08 - 0.6 / max(len(rows), 1)), ncol=8, fontsize=7)
    fig.tight_layout()
    fig.savefig(a.output, dpi=110)


if __name__ == "__main__":
    main()
