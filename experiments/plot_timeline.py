#!/usr/bin/env python3
"""Per-rank Gantt chart of a Merak trace (Chrome Trace Event JSON, as
written by `merak sim --trace` and `merak run --trace`).

    plot_timeline.py TRACE -o out.png [--overlay TRACE2] [--max-ranks N]
                     [--window T0:T1] [--view auto|events|density] [--title T]

One row per track (rank, stream, lane: "rank 0 p2p #2" is p2p's second
lane, traces/README.md) that has events; bars coloured by instruction
kind.  --overlay draws a second trace (e.g. the measured run of a
predicted one) as black outlines in the same rows, for predicted vs
measured.  --window T0:T1 (ms from the trace's start) zooms in.

--view: `events` draws every event; `density` splits each row into time
bins and stacks, per bin, the share of the bin each kind kept the track
busy (the pipeline's shape without one solid band); `auto` (the default)
draws events unless a row holds more events in the window than the plot
has room for (one per 4 pixels, ~310: 256 micro-batches on one stage are ~770),
then the density view.  The title comes from the trace's metadata (model,
layout, schedule, micro-batches, source); the legend sits right of the
plot.  A file that cannot be read is one line on stderr, exit 2."""
import argparse
import json
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

PROG = "plot_timeline"
STREAMS = ["compute", "p2p", "tp", "dp", "cp"]
LANE_TID = 10  # tid = stream + 10 * lane (include/merak/trace.h)
COLOURS = [
    ("F_PRE", "#9ecae1"), ("F", "#3182bd"), ("R", "#fd8d3c"), ("B_IN", "#31a354"),
    ("B_W", "#a1d99b"), ("B", "#006d2c"), ("SEND", "#969696"), ("RECV", "#d9d9d9"),
    ("tp", "#9e9ac8"), ("A2A.ep", "#6a51a3"), ("AR.tied", "#e377c2"), ("dp", "#d62728"),
    ("OPT", "#8c564b"), ("LOAD", "#bcbd22"), ("other", "#525252"),
]
WIDTH_IN, DPI = 14, 110


def fail(msg):
    print("%s: %s" % (PROG, msg), file=sys.stderr)
    sys.exit(2)


def kind(name):
    base = name.rstrip("0123456789")
    if base.endswith(".dp"):
        return "dp"
    if base in ("AR.tp", "RS.sp", "AG.sp", "RS+AG.tp"):
        return "tp"
    if base in ("F_PRE", "F", "R", "B_IN", "B_W", "B", "AR.tied", "OPT", "A2A.ep"):
        return base
    for k in ("SEND", "RECV", "LOAD"):
        if base.startswith(k):
            return k
    return "other"


def load(path, counters=False):
    """(complete events, metadata, thread names) of a trace; fail() on a
    bad file.  counters: every event (plot_memory.py), X events unchecked."""
    try:
        with open(path) as f:
            d = json.load(f)
    except OSError as e:
        fail("%s: cannot read: %s" % (path, e.strerror))
    except (ValueError, UnicodeDecodeError) as e:
        fail("%s: not a JSON trace: %s" % (path, e))
    ev = d.get("traceEvents") if isinstance(d, dict) else d
    if not isinstance(ev, list):
        fail("%s: not a Chrome trace (no traceEvents array)" % path)
    meta = d.get("otherData", {}) if isinstance(d, dict) else {}
    meta = meta if isinstance(meta, dict) else {}
    if counters:
        return [e for e in ev if isinstance(e, dict)], meta, {}
    xs, names = [], {}
    for i, e in enumerate(ev):
        if not isinstance(e, dict):
            fail("%s: event %d is not an object" % (path, i))
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e.get("pid"), e.get("tid"))] = str(e.get("args", {}).get("name"))
        if e.get("ph") != "X":
            continue
        ok = all(isinstance(e.get(k), (int, float)) and not isinstance(e.get(k), bool) for k in ("ts", "dur"))
        if not ok or not isinstance(e.get("pid"), int) or not isinstance(e.get("name"), str):
            fail("%s: complete event %d needs name, integer pid, numeric ts and dur" % (path, i))
        e.setdefault("tid", 0)
        xs.append(e)
    if not xs:
        fail("%s: no complete events" % path)
    return xs, meta, names


def title_of(path, meta):
    """model, layout, schedule, micro-batches (source) from the metadata; else the file name."""
    parts = [str(meta[k]) for k in ("model", "layout", "schedule") if meta.get(k)]
    if meta.get("micro_batches"):
        parts.append("%s micro-batches" % meta["micro_batches"])
    if not parts:
        return os.path.basename(path)
    return ", ".join(parts) + ("; %s" % meta["source"] if meta.get("source") else "")


def track_key(t):
    """Rows: a rank's streams in order, each stream's lanes under it."""
    return (t[0], t[1] % LANE_TID, t[1] // LANE_TID) if isinstance(t[1], int) else (t[0], 99, str(t[1]))


def track_label(t, names):
    if (t[0], t[1]) in names:
        return "rank %d %s" % (t[0], names[(t[0], t[1])])
    if isinstance(t[1], int) and t[1] % LANE_TID < len(STREAMS):
        lane = t[1] // LANE_TID
        return "rank %d %s%s" % (t[0], STREAMS[t[1] % LANE_TID], " #%d" % (lane + 1) if lane else "")
    return "rank %d tid %s" % (t[0], t[1])


def window_of(spec, ev, t0):
    """(lo, hi) in ms from t0; the whole trace without --window."""
    if not spec:
        return 0.0, (max(e["ts"] + e["dur"] for e in ev) - t0) / 1e3
    try:
        lo, hi = (float(x) for x in spec.split(":"))
    except ValueError:
        fail("--window %s: want T0:T1 in ms (e.g. 0:5.5)" % spec)
    if not (0 <= lo < hi):
        fail("--window %s: want 0 <= T0 < T1" % spec)
    return lo, hi


def clip(ev, t0, lo, hi):
    """Events overlapping [lo, hi] ms, as (track, kind, start ms, end ms)."""
    out = []
    for e in ev:
        s, f = (e["ts"] - t0) / 1e3, (e["ts"] + max(e["dur"], 0) - t0) / 1e3
        if f >= lo and s <= hi:
            out.append(((e["pid"], e["tid"]), kind(e["name"]), max(s, lo), min(f, hi)))
    return out


def draw_events(ax, ev, index, colour):
    for k, _ in COLOURS:
        by_row = {}
        for t, kk, s, f in ev:
            if kk == k and t in index:
                by_row.setdefault(t, []).append((s, f - s))
        for t, bars in by_row.items():
            ax.broken_barh(bars, (index[t] - 0.4, 0.8), facecolors=colour[k], linewidth=0)


def busy(starts, ends, x):
    """Busy time of disjoint-or-nested intervals up to each x: sum over
    events of clip(x - start, 0, end - start)."""
    s, f = np.sort(starts), np.sort(ends)
    cs, cf = np.concatenate(([0], np.cumsum(s))), np.concatenate(([0], np.cumsum(f)))
    ns, nf = np.searchsorted(s, x, side="right"), np.searchsorted(f, x, side="right")
    return (ns * x - cs[ns]) - (nf * x - cf[nf])


def draw_density(ax, ev, index, colour, lo, hi, bins):
    edges = np.linspace(lo, hi, bins + 1)
    width = edges[1] - edges[0]
    bottom = {t: np.zeros(bins) for t in index}
    for k, _ in COLOURS:
        by_row = {}
        for t, kk, s, f in ev:
            if kk == k and t in index:
                by_row.setdefault(t, ([], []))
                by_row[t][0].append(s), by_row[t][1].append(f)
        for t, (s, f) in by_row.items():
            share = np.minimum(np.diff(busy(np.array(s), np.array(f), edges)) / width, 1.0) * 0.8
            ax.bar(edges[:-1], share, width=width, bottom=index[t] + 0.4 - bottom[t] - share, align="edge",
                   color=colour[k], linewidth=0)
            bottom[t] += share


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--overlay")
    ap.add_argument("--max-ranks", type=int, default=64)
    ap.add_argument("--window", help="T0:T1 in ms from the trace's start")
    ap.add_argument("--view", choices=("auto", "events", "density"), default="auto")
    ap.add_argument("--bins", type=int, help="time bins of the density view (default: 16 events of the "
                    "densest row per bin, 40 to 160)")
    ap.add_argument("--title")
    a = ap.parse_args()
    if not (1 <= a.max_ranks <= 4096 and (a.bins is None or 10 <= a.bins <= 4000)):
        fail("--max-ranks wants 1 to 4096, --bins 10 to 4000")
    ev, meta, names = load(a.trace)
    ov, ov_meta, _ = load(a.overlay) if a.overlay else ([], {}, {})
    t0 = min(e["ts"] for e in ev + ov)
    lo, hi = window_of(a.window, ev + ov, t0)
    ranks = set(sorted({e["pid"] for e in ev})[: a.max_ranks])
    cev = [x for x in clip(ev, t0, lo, hi) if x[0][0] in ranks]
    cov = [x for x in clip(ov, t0, lo, hi) if x[0][0] in ranks]
    rows = sorted({x[0] for x in cev + cov}, key=track_key)
    if not rows:
        fail("no events in the window %g:%g ms" % (lo, hi))
    index = {r: i for i, r in enumerate(rows)}
    colour = dict(COLOURS)
    per_row = max(sum(1 for x in cev if x[0] == r) for r in rows)
    dense = a.view == "density" or (a.view == "auto" and per_row > WIDTH_IN * DPI * 0.8 / 4)
    fig, ax = plt.subplots(figsize=(WIDTH_IN, max(2.5, 0.32 * len(rows) + 1.4)))
    bins = a.bins or min(160, max(40, per_row // 16))  # many events per bin: shares, not aliasing
    if dense:
        draw_density(ax, cev, index, colour, lo, hi, bins)
    else:
        draw_events(ax, cev, index, colour)
    by_row = {}
    for t, _, s, f in cov:
        by_row.setdefault(t, []).append((s, f - s))
    for t, bars in by_row.items():
        ax.broken_barh(bars, (index[t] - 0.45, 0.9), facecolors="none", edgecolors="black", linewidth=0.6)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([track_label(r, names) for r in rows], fontsize=7)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(lo, hi)
    ax.set_xlabel("time (ms)" + ("; each column: share of a %.3g ms bin busy, by kind" % ((hi - lo) / bins)
                                  if dense else ""))
    title = a.title or title_of(a.trace, meta)
    if a.window:
        title += " [%g to %g ms]" % (lo, hi)
    if a.overlay:
        title += "\noutlines: " + title_of(a.overlay, ov_meta)
    ax.set_title(title, fontsize=9)
    used = {x[1] for x in cev}
    handles = [Patch(color=c, label=k) for k, c in COLOURS if k in used]
    if cov:
        handles.append(Patch(facecolor="none", edgecolor="black", label="overlay"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0, fontsize=7)
    try:
        fig.savefig(a.output, dpi=DPI, bbox_inches="tight")
    except (OSError, ValueError) as e:
        fail("%s: cannot write: %s" % (a.output, e))


if __name__ == "__main__":
    main()
