#!/usr/bin/env python3
"""Predicted peak memory against measured peaks (issue 34).

    memory.py --merak M --out DIR [--mpiexec CMD] [--no-run] [--no-plot]

Two sets of runs:
  published   published.json here: measured peak memory per GPU of
              published training runs, each replayed with `merak sim
              --json` on the flags it lists (the largest stage's peak);
  merak run   `merak run --json` on the CPU executor (gpt-tiny, fp32, one
              step under mpiexec) against `merak sim --dtype fp32 --cluster
              ideal` of the same layout, stage by stage (--no-run skips it).
Writes DIR/memory.csv (one row per run or stage), DIR/summary.md (the
table and the error figures per group) and DIR/memory.png (predicted
against measured).  Exit 2 on a run that fails or a file it cannot read."""
import argparse
import csv
import json
import os
import shlex
import subprocess
import sys
import tempfile

GIB = 2.0 ** 30
HERE = os.path.dirname(os.path.abspath(__file__))
TERMS = ["weights", "grads", "optimizer", "activations", "working", "buffers", "gathered"]

# The layouts tests/mpi-memory.sh checks (dp pp tp mbs gbs schedule recompute zero).
RUN_LAYOUTS = [
    (1, 1, 1, 4, 8, "1f1b", "none", 0), (1, 2, 1, 2, 16, "1f1b", "full", 0),
    (1, 2, 2, 2, 16, "1f1b", "full", 0), (1, 4, 1, 1, 16, "gpipe", "full", 0),
    (4, 1, 1, 1, 8, "1f1b", "full", 1), (4, 1, 1, 1, 8, "1f1b", "full", 2),
    (4, 1, 1, 1, 8, "1f1b", "full", 3), (2, 2, 1, 1, 8, "1f1b", "full", 3),
]


def die(msg):
    print("memory.py: " + msg, file=sys.stderr)
    sys.exit(2)


def run_json(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        die("%s failed (exit %d): %s" % (" ".join(cmd), p.returncode, p.stderr.strip()[:300]))
    try:
        return json.loads(p.stdout)
    except ValueError:
        die("%s: its output is not JSON" % " ".join(cmd))


def published_rows(merak):
    try:
        with open(os.path.join(HERE, "published.json")) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        die("published.json: %s" % e)
    out = []
    for n, r in enumerate(data["rows"]):
        src = data["sources"][r["source"]]
        flags = shlex.split(r["flags"]) + shlex.split(src.get("flags", ""))  # the source's hardware, software
        j = run_json([merak, "sim", "--json"] + flags)
        peaks = j["peak_memory_bytes"]
        s = max(range(len(peaks)), key=lambda i: peaks[i])
        b = j["memory_breakdown"][s]
        print("  %-58s measured %6.1f GiB, predicted %6.1f" % (r["run"][:58], r["measured_gib"], peaks[s] / GIB),
              file=sys.stderr)
        out.append(dict(group="published", row="%s#%d" % (r["source"], n), source=r["source"] + " T" + r["table"],
                        run=r["run"], measured_gib=r["measured_gib"], predicted_gib=peaks[s] / GIB,
                        fits=int(bool(j["fits"])), stage=s, modelled=r.get("modelled", ""),
                        flags=" ".join(flags), **{t: b.get(t, 0) / GIB for t in TERMS}))
    return out


def executor_rows(merak, mpiexec):
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for dp, pp, tp, mbs, gbs, sched, rec, zero in RUN_LAYOUTS:
            f = ["--dp", str(dp), "--pp", str(pp), "--tp", str(tp), "--mbs", str(mbs), "--gbs", str(gbs),
                 "--schedule", sched, "--recompute", rec, "--zero", str(zero)]
            n = dp * pp * tp
            r = run_json(shlex.split(mpiexec) + ["-n", str(n), merak, "run"] + f +
                         ["--steps", "1", "--json", "--save", os.path.join(tmp, "ckpt%d" % len(out))])
            j = run_json([merak, "sim", "--model", "gpt-tiny", "--dtype", "fp32", "--cluster", "ideal", "--json"] + f)
            for s, (meas, pred) in enumerate(zip(r["peak_memory_bytes"], j["peak_memory_bytes"])):
                b = j["memory_breakdown"][s]
                lay = "dp %d pp %d tp %d mbs %d %s %s zero %d" % (dp, pp, tp, mbs, sched, rec, zero)
                out.append(dict(group="merak run", row="run#%d.%d" % (len(out), s), source="merak run (CPU)",
                                run="%s, stage %d" % (lay, s), measured_gib=meas / GIB, predicted_gib=pred / GIB,
                                fits=1, stage=s, modelled="gpt-tiny fp32, one step",
                                flags=" ".join(f), **{t: b.get(t, 0) / GIB for t in TERMS}))
            print("  merak run %-40s %d stage(s)" % (" ".join(f[:6]), len(r["peak_memory_bytes"])), file=sys.stderr)
    return out


def errors(rows):
    e = [(r["predicted_gib"] - r["measured_gib"]) / r["measured_gib"] for r in rows]
    if not e:
        return None
    return dict(n=len(e), mape=sum(abs(x) for x in e) / len(e), bias=sum(e) / len(e),
                within10=sum(1 for x in e if abs(x) <= 0.10), worst=max(e, key=abs),
                not_fit=sum(1 for r in rows if not r["fits"]))


def groups(rows):
    """(name, rows) the summary reports separately: the recompute policy,
    and the measured quantity (published: the allocator's reserve)."""
    pub = [r for r in rows if r["group"] == "published"]
    full = [r for r in pub if "--recompute full" in r["flags"]]
    return [("published, full recompute", full),
            ("published, torchtitan's op-level SAC (selective-op)", [r for r in pub if r not in full]),
            ("published, all", pub),
            ("merak run (CPU executor, per stage)", [r for r in rows if r["group"] == "merak run"])]


def write_summary(rows, path):
    with open(path, "w") as f:
        f.write("# Predicted against measured peak memory\n\n")
        f.write("Written by `experiments/memory/run.sh`; GiB = 2^30 bytes.  Error = (predicted - measured) "
                "/ measured.\n\n")
        f.write("| group | runs | mean abs error | mean error | within 10% | worst | predicted not to fit |\n")
        f.write("|---|---:|---:|---:|---:|---:|---:|\n")
        for name, g in groups(rows):
            e = errors(g)
            if e:
                f.write("| %s | %d | %.1f%% | %+.1f%% | %d | %+.1f%% | %d |\n" % (
                    name, e["n"], 100 * e["mape"], 100 * e["bias"], e["within10"], 100 * e["worst"], e["not_fit"]))
        f.write("\n| run | source | measured GiB | predicted GiB | error | fits | weights | grads | optimizer "
                "| activations | working | gathered | modelled |\n")
        f.write("|---|---|---:|---:|---:|:-:|---:|---:|---:|---:|---:|---:|---|\n")
        for r in rows:
            err = (r["predicted_gib"] - r["measured_gib"]) / r["measured_gib"]
            f.write("| %s | %s | %.3g | %.3g | %+.0f%% | %s | %.3g | %.3g | %.3g | %.3g | %.3g | %.3g | %s |\n" % (
                r["run"], r["source"], r["measured_gib"], r["predicted_gib"], 100 * err, "yes" if r["fits"] else "NO",
                r["weights"], r["grads"], r["optimizer"], r["activations"], r["working"], r["gathered"],
                r["modelled"]))


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(12, 5.2))
    panels = [("published runs (GiB per GPU)", [r for r in rows if r["group"] == "published"], 1.0),
              ("merak run, CPU executor (MiB per stage)", [r for r in rows if r["group"] == "merak run"], 1024.0)]
    for ax, (title, g, scale) in zip(axes, panels):
        if not g:
            ax.set_visible(False)
            continue
        tables = sorted({r["source"] for r in g})
        for t in tables:
            pts = [r for r in g if r["source"] == t]
            ax.scatter([r["measured_gib"] * scale for r in pts], [r["predicted_gib"] * scale for r in pts],
                       label=t, s=28, zorder=3)
        lo = min(min(r["measured_gib"], r["predicted_gib"]) for r in g) * scale * 0.8
        hi = max(max(r["measured_gib"], r["predicted_gib"]) for r in g) * scale * 1.2
        ax.plot([lo, hi], [lo, hi], "k-", lw=0.8, zorder=1)
        ax.fill_between([lo, hi], [0.9 * lo, 0.9 * hi], [1.1 * lo, 1.1 * hi], color="0.88", label="within 10%",
                        zorder=0)
        if scale == 1.0:  # the published runs' device: 96 GB
            ax.axhline(96e9 / GIB, color="r", ls="--", lw=0.8, label="96 GB (the device)", zorder=1)
        ax.set_xlim(lo, hi), ax.set_ylim(lo, hi)
        ax.set_xlabel("measured"), ax.set_ylabel("predicted (merak sim)"), ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--merak", default="./merak")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--mpiexec", default=os.environ.get("MPIEXEC", "mpiexec"))
    ap.add_argument("--no-run", action="store_true", help="skip the merak run (CPU executor) comparison")
    ap.add_argument("--no-plot", action="store_true")
    a = ap.parse_args()
    if not os.access(a.merak, os.X_OK):
        die("no merak at '%s'" % a.merak)
    os.makedirs(a.out, exist_ok=True)
    print("published runs:", file=sys.stderr)
    rows = published_rows(a.merak)
    if not a.no_run:
        print("merak run against merak sim:", file=sys.stderr)
        rows += executor_rows(a.merak, a.mpiexec)
    keys = ["group", "row", "source", "run", "measured_gib", "predicted_gib", "fits", "stage"] + TERMS + \
        ["modelled", "flags"]
    with open(os.path.join(a.out, "memory.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    write_summary(rows, os.path.join(a.out, "summary.md"))
    if not a.no_plot:
        plot(rows, os.path.join(a.out, "memory.png"))
    for name, g in groups(rows):
        e = errors(g)
        if e:
            print("%-62s %2d runs  mean |error| %5.1f%%  mean %+6.1f%%  within 10%%: %d  not fitting: %d" % (
                name, e["n"], 100 * e["mape"], 100 * e["bias"], e["within10"], e["not_fit"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
