#!/usr/bin/env python3
"""The scaling sweep of `merak plan --gpus N1,N2,... --json` (its "scaling"
list): tokens/s against the GPU count with the ideal line from the
smallest count, and the scaling efficiency (tokens/s per GPU over the
smallest count's), each point labelled with its plan's layout.

    plot_scaling.py PLAN.json -o out.png [--title T]"""
import argparse
import json
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("plan", help="merak plan --gpus N1,N2,... --json output ('-': stdin)")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--title")
    a = ap.parse_args()
    d = json.load(sys.stdin if a.plan == "-" else open(a.plan))
    pts = sorted((s for s in d.get("scaling", []) if s.get("found")), key=lambda s: s["gpus"])
    if len(pts) < 2:
        print("plot_scaling: %s has fewer than two GPU counts with a plan (run merak plan --gpus N1,N2,... --json)"
              % a.plan, file=sys.stderr)
        sys.exit(2)
    g = [s["gpus"] for s in pts]
    tps = [s["tokens_per_s"] for s in pts]
    eff = [100 * s["scaling_efficiency"] for s in pts]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
    ax.plot(g, tps, "o-", label="best plan")
    ax.plot(g, [tps[0] * x / g[0] for x in g], "--", color="gray", label="linear from %d GPUs" % g[0])
    for x, y, s in zip(g, tps, pts):
        ax.annotate("%s\n%s" % (s["layout"], s["schedule"]), (x, y), textcoords="offset points", xytext=(-6, 8), ha="right",
                    fontsize=7)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")  # log-log: linear scaling is a straight line
    ax.set_xticks(g)
    ax.set_xticklabels([str(x) for x in g])
    ax.set_xlabel("GPUs")
    ax.set_ylabel("tokens/s")
    ax.legend(loc="upper left")
    ax.grid(alpha=0.3)
    bx.bar([str(x) for x in g], eff, color="tab:green")
    for i, e in enumerate(eff):
        bx.text(i, e + 1, "%.1f%%" % e, ha="center", fontsize=8)
    bx.axhline(100, color="gray", ls="--")
    bx.set_xlabel("GPUs")
    bx.set_ylabel("scaling efficiency (%)")
    bx.set_ylim(0, max(110, max(eff) + 10))
    fig.suptitle(a.title or "merak plan: best plan per GPU count (same global batch)")
    fig.tight_layout()
    fig.savefig(a.output, dpi=120)


if __name__ == "__main__":
    main()
