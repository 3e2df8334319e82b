#!/bin/sh
# mpiexec -n 2 merak plan returns the same plans as one rank.
. "$top_srcdir/tests/lib.sh"
PY=${PYTHON:-python3}
small="--model gpt-tiny --num-layers 8 --hidden-size 512 --num-attention-heads 8 --seq-length 512 --vocab-size 8000"
"$MERAK" plan $small --cluster dgx-a100 --gpus 8 --gbs 32 --top 3 --json >"$tmpdir/one.json" || exit 1
"$MPIEXEC" $MPIEXEC_FLAGS -n 2 "$MERAK" plan $small --cluster dgx-a100 --gpus 8 --gbs 32 --top 3 --json \
  >"$tmpdir/two.json" 2>"$tmpdir/err" || { cat "$tmpdir/err"; exit 1; }
check "same plans on 1 and 2 ranks" "$PY" -c '
import json, sys
a, b = (json.load(open(f))["plans"] for f in sys.argv[1:3])
assert [p["plan"] for p in a] == [p["plan"] for p in b]
assert [p["step_time_s"] for p in a] == [p["step_time_s"] for p in b]
' "$tmpdir/one.json" "$tmpdir/two.json"
finish
