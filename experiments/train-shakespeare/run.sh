#!/bin/sh
# Train two small models with the same parameter budget on the shipped
# tiny-shakespeare slice with `merak run` on 2 ranks (dp=2), with a
# validation loss every 25 steps: a GPT (4 blocks, hidden 128, 4 heads,
# byte vocabulary 256; 834,304 parameters) and a Llama (llama-tiny at
# hidden 128: 4 heads, 2 KV heads, SwiGLU width 372, untied head; 834,688).
# Writes losses.csv (model,step,train_loss,val_loss) and loss.png (both
# curves in one plot) next to this script and prints each model's start
# and end losses.  MODELS="gpt" or "llama" runs one of them.
#   experiments/train-shakespeare/run.sh [path/to/merak] [extra merak run flags]
set -e
here=$(cd "$(dirname "$0")" && pwd)
MERAK=${1:-$here/../../merak}; [ $# -gt 0 ] && shift
MPIEXEC=${MPIEXEC:-mpiexec}
STEPS=${STEPS:-300}
MODELS=${MODELS:-gpt llama}
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
for m in $MODELS; do
  case $m in
    gpt) arch="--model gpt-tiny" ;;
    llama) arch="--model llama-tiny --ffn-hidden-size 372" ;;
    *) echo "run.sh: unknown model '$m' (gpt, llama)" >&2; exit 2 ;;
  esac
  timeout 900 $MPIEXEC -n 2 "$MERAK" run --dp 2 $arch --hidden-size 128 --num-attention-heads 4 \
    --seq-length 64 --gbs 16 --steps "$STEPS" --lr 2e-3 --lr-warmup-iters 20 --data "$here/tinyshakespeare.txt" \
    --eval-interval 25 --eval-batches 4 --json "$@" >"$out/$m.json"
done
/usr/bin/python3 - "$out" "$here" $MODELS <<'PY'
import json, sys
src, d, models = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(d + "/losses.csv", "w") as f:
    f.write("model,step,train_loss,val_loss\n")
    for m in models:
        r = json.load(open("%s/%s.json" % (src, m)))
        val = {v["step"]: v["loss"] for v in r["val_losses"]}
        for i, l in enumerate(r["losses"]):
            s = r["first_step"] + i + 1
            f.write("%s,%d,%.6f,%s\n" % (m, s, l, "%.6f" % val[s] if s in val else ""))
        L = r["losses"]; V = r["val_losses"]
        print("%s: train loss: start %.4f (step 1), end %.4f (mean of the last 10 steps)"
              % (m, L[0], sum(L[-10:]) / len(L[-10:])))
        print("%s: validation loss: first %.4f (step %d), end %.4f (step %d)"
              % (m, V[0]["loss"], V[0]["step"], V[-1]["loss"], V[-1]["step"]))
        print("%s: step time %.1f ms, %.0f tokens/s" % (m, 1e3 * r["step_time_s"], r["tokens_per_s"]))
PY
/usr/bin/python3 "$here/plot.py" "$here/losses.csv" "$here/loss.png"
