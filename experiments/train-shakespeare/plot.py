"""Plot training and validation loss from losses.csv (step,train_loss,val_loss)."""
import csv, math, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

rows = list(csv.DictReader(open(sys.argv[1])))
st = [int(r["step"]) for r in rows]
tr = [float(r["train_loss"]) for r in rows]
vs = [(int(r["step"]), float(r["val_loss"])) for r in rows if r["val_loss"]]
fig, ax = plt.subplots(figsize=(7, 4.2))
ax.plot(st, tr, lw=0.8, alpha=0.6, label="training (global batch)")
ax.plot([s for s, _ in vs], [v for _, v in vs], "o-", ms=4, label="validation (held-out 10%)")
ax.axhline(math.log(256), ls=":", c="grey", lw=0.8, label="uniform over 256 bytes")
ax.set_xlabel("step")
ax.set_ylabel("cross-entropy (nats/byte)")
ax.set_title("merak run: 4-block GPT, hidden 128, on tiny shakespeare (dp=2)")
ax.legend()
ax.grid(alpha=0.3)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
print("wrote", sys.argv[2])
