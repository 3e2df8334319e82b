#!/bin/sh
# Train a small GPT (4 blocks, hidden 128, byte vocabulary 256) on the
# shipped tiny-shakespeare slice with `merak run` on 2 ranks (dp=2), with a
# validation loss every 25 steps; write losses.csv and loss.png next to this
# script and print the start and end losses.
#   experiments/train-shakespeare/run.sh [path/to/merak] [extra merak run flags]
set -e
here=$(cd "$(dirname "$0")" && pwd)
MERAK=${1:-$here/../../merak}; [ $# -gt 0 ] && shift
MPIEXEC=${MPIEXEC:-mpiexec}
STEPS=${STEPS:-300}
out=$(mktemp); trap 'rm -f "$out"' EXIT
timeout 900 $MPIEXEC -n 2 "$MERAK" run --dp 2 --model gpt-tiny --hidden-size 128 --num-attention-heads 4 \
  --seq-length 64 --gbs 16 --steps "$STEPS" --lr 2e-3 --lr-warmup-iters 20 --data "$here/tinyshakespeare.txt" \
  --eval-interval 25 --eval-batches 4 --json "$@" >"$out"
/usr/bin/python3 - "$out" "$here" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); d = sys.argv[2]
val = {v["step"]: v["loss"] for v in r["val_losses"]}
with open(d + "/losses.csv", "w") as f:
    f.write("step,train_loss,val_loss\n")
    for i, l in enumerate(r["losses"]):
        s = r["first_step"] + i + 1
        f.write("%d,%.6f,%s\n" % (s, l, "%.6f" % val[s] if s in val else ""))
L = r["losses"]; V = r["val_losses"]
print("train loss: start %.4f (step 1), end %.4f (mean of the last 10 steps)" % (L[0], sum(L[-10:]) / len(L[-10:])))
print("validation loss: first %.4f (step %d), end %.4f (step %d)" % (V[0]["loss"], V[0]["step"], V[-1]["loss"], V[-1]["step"]))
print("step time %.1f ms, %.0f tokens/s" % (1e3 * r["step_time_s"], r["tokens_per_s"]))
PY
/usr/bin/python3 "$here/plot.py" "$here/losses.csv" "$here/loss.png"
