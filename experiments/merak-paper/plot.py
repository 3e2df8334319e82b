#!/usr/bin/env python3
"""Bar chart of throughput per model and system, and Merak's speedups over
each baseline, from the CSV written by run.sh (printed as a table too)."""
import argparse, csv, collections
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

ap = argparse.ArgumentParser()
ap.add_argument("csv")
ap.add_argument("-o", "--out", default="speedup.png")
a = ap.parse_args()
rows = list(csv.DictReader(open(a.csv)))
tput = collections.OrderedDict()
for r in rows:
    tput.setdefault(r["model"], {})[r["system"]] = float(r["tokens_per_s"])
systems = ["megatron", "megatron-sp", "deepspeed", "merak"]
print("%-10s %12s %12s %12s %12s   merak/megatron merak/megatron-sp merak/deepspeed" % ("model", *systems))
for m, t in tput.items():
    print("%-10s %12.0f %12.0f %12.0f %12.0f   %14.2fx %17.2fx %15.2fx" % (
        m, *(t[s] for s in systems), t["merak"] / t["megatron"], t["merak"] / t["megatron-sp"],
        t["merak"] / t["deepspeed"]))
fig, ax = plt.subplots(figsize=(9, 4.5))
w = 0.2
for i, s in enumerate(systems):
    xs = [j + (i - 1.5) * w for j in range(len(tput))]
    ax.bar(xs, [t[s] / 1e3 for t in tput.values()], w, label=s)
for j, t in enumerate(tput.values()):
    ax.text(j + 1.5 * w, t["merak"] / 1e3, "%.2fx" % (t["merak"] / t["megatron"]), ha="center", va="bottom",
            fontsize=8)
ax.set_xticks(range(len(tput)))
ax.set_xticklabels(list(tput))
ax.set_ylabel("simulated throughput (k tokens/s)")
ax.set_title("64 x RTX 3090 (rtx3090-pcie): best plan per system; label: Merak over Megatron-LM")
ax.legend()
fig.tight_layout()
fig.savefig(a.out, dpi=120)
