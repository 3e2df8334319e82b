"""Plot training and validation loss of each model in losses.csv
(model,step,train_loss,val_loss) in one figure."""
import csv, math, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

LABEL = {"gpt": "GPT (834,304 params)", "llama": "Llama (834,688 params)"}
rows = list(csv.DictReader(open(sys.argv[1])))
fig, ax = plt.subplots(figsize=(7, 4.2))
for i, m in enumerate(dict.fromkeys(r["model"] for r in rows)):
    mine = [r for r in rows if r["model"] == m]
    c, name = "C%d" % i, LABEL.get(m, m)
    ax.plot([int(r["step"]) for r in mine], [float(r["train_loss"]) for r in mine], c=c, lw=0.8, alpha=0.45,
            label=name + ": training (global batch)")
    vs = [(int(r["step"]), float(r["val_loss"])) for r in mine if r["val_loss"]]
    ax.plot([s for s, _ in vs], [v for _, v in vs], "o-", c=c, ms=4, label=name + ": validation (held-out 10%)")
ax.axhline(math.log(256), ls=":", c="grey", lw=0.8, label="uniform over 256 bytes")
ax.set_xlabel("step")
ax.set_ylabel("cross-entropy (nats/byte)")
ax.set_title("merak run: 4 blocks, hidden 128, on tiny shakespeare (dp=2)")
ax.legend(fontsize=8)
ax.grid(alpha=0.3)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
print("wrote", sys.argv[2])
