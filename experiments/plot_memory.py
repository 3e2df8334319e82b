#!/usr/bin/env python3
"""Per-stage memory over time from a Merak trace's counter events
("ph":"C", name "memory", args {"bytes": N}).

    plot_memory.py TRACE -o out.png [--limit BYTES]"""
import argparse
import json
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--limit", type=float, help="device memory in bytes (a dashed line)")
    a = ap.parse_args()
    with open(a.trace) as f:
        d = json.load(f)
    ev = d["traceEvents"] if isinstance(d, dict) else d
    names = {e["pid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "process_name"}
    series = {}
    for e in ev:
        if e.get("ph") == "C" and e.get("name") == "memory":
            series.setdefault(e["pid"], []).append((e["ts"] / 1e3, e["args"]["bytes"] / 2**30))
    if not series:
        sys.exit("plot_memory: no memory counter events in %s" % a.trace)
    fig, ax = plt.subplots(figsize=(11, 5))
    for pid in sorted(series):
        pts = sorted(series[pid])
        ax.step([p[0] for p in pts], [p[1] for p in pts], where="post", label=names.get(pid, "rank %d" % pid))
    if a.limit:
        ax.axhline(a.limit / 2**30, color="red", linestyle="--", label="limit")
    ax.set_xlabel("time (ms)")
    ax.set_ylabel("memory (GiB)")
    ax.set_title(a.trace, fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(a.output, dpi=110)


if __name__ == "__main__":
    main()
