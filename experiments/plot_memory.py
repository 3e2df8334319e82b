#!/usr/bin/env python3
"""Per-rank memory over time from a Merak trace's counter events
("ph":"C", name "memory", args {"bytes": N}).

    plot_memory.py TRACE -o out.png [--limit BYTES] [--window T0:T1] [--title T]

The title comes from the trace's metadata (model, layout, schedule,
micro-batches, source), the unit (GiB, MiB or KiB) from the largest
value, the legend sits right of the plot; --window T0:T1 (ms from the
trace's start, as plot_timeline.py) zooms in.  A file that cannot be read is
one line on stderr, exit 2."""
import argparse
import importlib.util
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PROG = "plot_memory"


def timeline():
    """plot_timeline.py beside this file: one trace loader and title for both plots."""
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("plot_timeline", os.path.join(here, "plot_timeline.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.PROG = PROG
    return mod


def unit(top):
    """(name, bytes) of the unit that shows the largest value as 1 or more."""
    for name, b in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if top >= b:
            return name, b
    return "B", 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--limit", type=float, help="device memory in bytes (a dashed line)")
    ap.add_argument("--window", help="T0:T1 in ms from the trace's start")
    ap.add_argument("--title")
    a = ap.parse_args()
    tl = timeline()
    ev, meta, _ = tl.load(a.trace, counters=True)
    names = {e["pid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "process_name"
             and isinstance(e.get("args"), dict)}
    series = {}
    for e in ev:
        if e.get("ph") == "C" and e.get("name") == "memory":
            b = e.get("args", {}).get("bytes") if isinstance(e.get("args"), dict) else None
            if not isinstance(b, (int, float)) or not isinstance(e.get("ts"), (int, float)):
                tl.fail("%s: a memory counter needs numeric ts and args.bytes" % a.trace)
            series.setdefault(e.get("pid"), []).append((e["ts"] / 1e3, b))
    if not series:
        tl.fail("%s: no memory counter events" % a.trace)
    top = max(max(b for _, b in s) for s in series.values())
    uname, ub = unit(max(top, a.limit or 0))
    fig, ax = plt.subplots(figsize=(11, 5))
    for pid in sorted(series, key=lambda p: (not isinstance(p, int), p if isinstance(p, int) else 0, str(p))):
        pts = sorted(series[pid])
        ax.step([p[0] for p in pts], [p[1] / ub for p in pts], where="post", label=names.get(pid, "rank %s" % pid))
    if a.limit:
        ax.axhline(a.limit / ub, color="red", linestyle="--", label="limit")
    ax.set_xlabel("time (ms)")
    ax.set_ylabel("memory (%s)" % uname)
    ax.set_ylim(0, 1.08 * max(top, a.limit or 0) / ub)
    title = a.title or tl.title_of(a.trace, meta)
    if a.window:
        lo, hi = tl.window_of(a.window, [], 0)
        ax.set_xlim(lo, hi)
        title += " [%g to %g ms]" % (lo, hi)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0,
              ncol=1 + len(series) // 24)
    try:
        fig.savefig(a.output, dpi=110, bbox_inches="tight")
    except (OSError, ValueError) as e:
        tl.fail("%s: cannot write: %s" % (a.output, e))


if __name__ == "__main__":
    main()
