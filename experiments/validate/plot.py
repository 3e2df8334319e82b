#!/usr/bin/env python3
"""Validation results: CSV, scatter plot and summary (called by run.sh).

usage: plot.py OUTDIR   (OUTDIR holds plans.txt and runs/NAME.{sim,run}.json
and runs/NAME.run-trace.json)

Measured bubble of a stage = 1 - (compute busy time of the stage's first
rank, waits excluded) / (span of the measured step over all ranks), the
simulator's definition of bubble_fraction applied to the executor's trace.
"""
import csv
import json
import os
import statistics
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def measured_bubbles(trace, pp, per_stage):
    ev = trace["traceEvents"] if isinstance(trace, dict) else trace
    xs = [e for e in ev if e.get("ph") == "X"]
    if not xs:
        return [float("nan")] * pp
    lo = min(e["ts"] for e in xs)
    hi = max(e["ts"] + e["dur"] for e in xs)
    out = []
    for s in range(pp):
        pid = s * per_stage
        busy = sum(e["dur"] for e in xs if e["pid"] == pid and e.get("tid") in (0, "compute")
                   and not e["name"].startswith("RECV_"))
        out.append(1 - busy / (hi - lo) if hi > lo else float("nan"))
    return out


def main():
    out = sys.argv[1]
    plans = []
    with open(os.path.join(out, "plans.txt")) as f:
        for line in f:
            line = line.strip()
            if line:
                name, n, flags = line.split("|")
                plans.append((name, int(n), flags))
    rows = []
    for name, n, flags in plans:
        sim = load(os.path.join(out, "runs", name + ".sim.json"))
        run = load(os.path.join(out, "runs", name + ".run.json"))
        lay = run["layout"]
        pp = lay["pp"]
        try:
            mb = measured_bubbles(load(os.path.join(out, "runs", name + ".run-trace.json")), pp,
                                  lay["dp"] * lay["tp"])
        except (OSError, ValueError, KeyError):
            mb = [float("nan")] * pp
        ps, ms = sim["step_time_s"], run["step_time_s"]
        later = run["step_times_s"][1:] or run["step_times_s"]
        try:
            loadavg = open(os.path.join(out, "runs", name + ".load")).read().strip()
        except OSError:
            loadavg = ""
        try:
            rnd = open(os.path.join(out, "runs", name + ".round")).read().strip()
        except OSError:
            rnd = ""
        pm, mm = sim["peak_memory_bytes"], run["peak_memory_bytes"]
        rows.append({
            "plan": name, "ranks": n, "flags": flags,
            "pred_step_s": ps, "meas_step_s": ms, "step_err": (ps - ms) / ms,
            "meas_min_step_s": min(later), "min_step_err": (ps - min(later)) / min(later),
            "meas_step_times_s": " ".join("%.4f" % t for t in run["step_times_s"]),
            "load1_runnable": loadavg, "round": rnd,
            "pred_bubble": " ".join("%.3f" % b for b in sim["bubble_fraction"]),
            "meas_bubble": " ".join("%.3f" % b for b in mb),
            "pred_peak_mem": " ".join(str(int(m)) for m in pm),
            "meas_peak_mem": " ".join(str(int(m)) for m in mm),
            "mem_err_worst": max(((p - m) / m for p, m in zip(pm, mm)), key=abs),
        })
    with open(os.path.join(out, "validation.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)

    errs = [abs(r["step_err"]) for r in rows]
    minerrs = [abs(r["min_step_err"]) for r in rows]
    merrs = [abs(r["mem_err_worst"]) for r in rows]
    by = {r["plan"]: r for r in rows}

    def speedup(a, b):  # b's time / a's time: a's speedup over b
        if a in by and b in by:
            return (by[b]["pred_step_s"] / by[a]["pred_step_s"], by[b]["meas_step_s"] / by[a]["meas_step_s"])
        return None
    abl = [("merak vs 1f1b (pp 2, recompute full)", speedup("pp2-merak-full", "pp2-1f1b-full")),
           ("stage-aware:0.5 vs full recompute (merak, pp 2)", speedup("pp2-merak-sa0.5", "pp2-merak-full")),
           ("sub-pipelined TP level 1 vs none (tp 2)", speedup("tp2-none-ov1", "tp2-none-ov0")),
           ("sub-pipelined TP level 2 vs none (tp 2)", speedup("tp2-none-ov2", "tp2-none-ov0")),
           ("zb-h1 vs 1f1b (pp 2, no recompute)", speedup("pp2-zbh1-none", "pp2-1f1b-none"))]
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("| plan | predicted s | measured s | error | bubble pred | bubble meas | peak MB pred | peak MB meas | mem error |\n")
        f.write("|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write("| %s | %.4f | %.4f | %+.1f%% | %s | %s | %s | %s | %+.1f%% |\n" % (
                r["plan"], r["pred_step_s"], r["meas_step_s"], 100 * r["step_err"], r["pred_bubble"],
                r["meas_bubble"], " ".join("%.1f" % (int(x) / 1e6) for x in r["pred_peak_mem"].split()),
                " ".join("%.1f" % (int(x) / 1e6) for x in r["meas_peak_mem"].split()), 100 * r["mem_err_worst"]))
        f.write("\nstep time (median of the measured steps after the first): median |error| %.1f%%, worst %.1f%% (%s)\n"
                % (100 * statistics.median(errs), 100 * max(errs), rows[errs.index(max(errs))]["plan"]))
        f.write("\nstep time (fastest measured step after the first): median |error| %.1f%%, worst %.1f%% (%s)\n"
                % (100 * statistics.median(minerrs), 100 * max(minerrs), rows[minerrs.index(max(minerrs))]["plan"]))
        # common mode: the ratio predicted/measured that all plans share
        # (the profile's snapshot of a shared machine against the runs'),
        # and what is left per plan once it is divided out
        ratio = statistics.median(r["pred_step_s"] / r["meas_step_s"] for r in rows)
        rel = [abs(r["pred_step_s"] / ratio - r["meas_step_s"]) / r["meas_step_s"] for r in rows]
        f.write("\ncommon-mode ratio predicted/measured %.3f; with it divided out: median |error| %.1f%%, worst %.1f%% (%s)\n"
                % (ratio, 100 * statistics.median(rel), 100 * max(rel), rows[rel.index(max(rel))]["plan"]))
        loads = [float(r["load1_runnable"].split()[0]) for r in rows if r["load1_runnable"]]
        if loads:
            f.write("\nload (1-minute average) when each kept measurement started: median %.2f, max %.2f "
                    "(the machine has %d cores; per plan in validation.csv)\n"
                    % (statistics.median(loads), max(loads), os.cpu_count() or 0))
        f.write("\npeak memory per stage: median |error| %.1f%%, worst %.1f%%\n"
                % (100 * statistics.median(merrs), 100 * max(merrs)))
        f.write("\n| ablation | predicted speedup | measured speedup |\n|---|---|---|\n")
        for what, s in abl:
            if s:
                f.write("| %s | %.3fx | %.3fx |\n" % (what, s[0], s[1]))
    print(open(os.path.join(out, "summary.md")).read())

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)
        return
    fig, ax = plt.subplots(1, 2, figsize=(11, 5))
    xs = [r["meas_step_s"] for r in rows]
    ys = [r["pred_step_s"] for r in rows]
    lo, hi = 0.8 * min(xs + ys), 1.2 * max(xs + ys)
    ax[0].plot([lo, hi], [lo, hi], "k-", lw=1, label="exact")
    for k, st in ((0.05, "--"), (0.10, ":")):
        ax[0].plot([lo, hi], [lo * (1 + k), hi * (1 + k)], "g" + st, lw=0.8, label="±%d%%" % (100 * k))
        ax[0].plot([lo, hi], [lo * (1 - k), hi * (1 - k)], "g" + st, lw=0.8)
    ax[0].scatter(xs, ys, c="C0")
    for r in rows:
        ax[0].annotate(r["plan"], (r["meas_step_s"], r["pred_step_s"]), fontsize=6)
    ax[0].set_xlabel("measured step time (s)")
    ax[0].set_ylabel("predicted step time (s)")
    ax[0].set_title("step time: median |err| %.1f%%, worst %.1f%%" % (100 * statistics.median(errs), 100 * max(errs)))
    ax[0].legend(fontsize=7)
    mx, my = [], []
    for r in rows:
        for p, m in zip(r["pred_peak_mem"].split(), r["meas_peak_mem"].split()):
            mx.append(int(m) / 1e6)
            my.append(int(p) / 1e6)
    lo, hi = 0.8 * min(mx + my), 1.2 * max(mx + my)
    ax[1].plot([lo, hi], [lo, hi], "k-", lw=1)
    ax[1].plot([lo, hi], [lo * 1.1, hi * 1.1], "g:", lw=0.8)
    ax[1].plot([lo, hi], [lo * 0.9, hi * 0.9], "g:", lw=0.8)
    ax[1].scatter(mx, my, c="C1")
    ax[1].set_xlabel("measured peak memory per stage (MB)")
    ax[1].set_ylabel("predicted (MB)")
    ax[1].set_title("peak memory: median |err| %.1f%%, worst %.1f%%" % (100 * statistics.median(merrs), 100 * max(merrs)))
    fig.tight_layout()
    fig.savefig(os.path.join(out, "scatter.png"), dpi=110)


if __name__ == "__main__":
    main()
