#!/bin/sh
# Failures end every rank quickly with one message: a rank that dies, a NaN
# loss, a missing or mismatched checkpoint, an unreadable data file.
. "$top_srcdir/tests/lib.sh"
PY=${PYTHON:-python3}
R="$MPIEXEC $MPIEXEC_FLAGS"
t0=$(date +%s)
MK_TEST_FAIL=5:2 timeout 10 $R -n 8 "$MERAK" run --dp 2 --pp 2 --tp 2 --gbs 8 --steps 20 >"$tmpdir/out" 2>"$tmpdir/err"
rc=$?; dt=$(( $(date +%s) - t0 ))
check "rank 5 dies at step 3: every rank ends within 10 s (rc=$rc, ${dt}s)" test $rc -ne 0 -a $rc -ne 124 -a $dt -le 10
check "rank 5 dies: a message" grep -q "rank 5" "$tmpdir/err"

MK_TEST_NAN=2 timeout 20 $R -n 4 "$MERAK" run --dp 2 --pp 2 --gbs 8 --steps 5 --save "$tmpdir/c.st" \
  --save-interval 1 >"$tmpdir/out" 2>"$tmpdir/err"
rc=$?
check "NaN loss: rc=$rc (non-zero, no timeout)" test $rc -ne 0 -a $rc -ne 124
check "NaN loss: one message naming the step and the last good checkpoint" \
  test "$(grep -c 'step 3: the loss is nan; the last good checkpoint is .*c.st (step 2)' "$tmpdir/err")" -eq 1
check "NaN loss: the last good checkpoint is intact" "$PY" "$top_srcdir/tests/st_read.py" "$tmpdir/c.st" --check=transformer.wte.weight=256x64
check "  ... and holds step 2" "$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import st_read
assert st_read.read(sys.argv[2])[0]["step"] == "2"' "$top_srcdir/tests" "$tmpdir/c.st"

fail4() { timeout 20 $R -n 4 "$MERAK" run --dp 2 --pp 2 --gbs 8 --steps 1 "$@"; }
expect_fail "missing checkpoint" "cannot open checkpoint" -- fail4 --load "$tmpdir/none.st"
expect_fail "checkpoint of another model" "model mismatch" -- fail4 --load "$tmpdir/c.st" --hidden-size 128
"$PY" - "$tmpdir/c.st" "$tmpdir/cut.st" "$tmpdir/shape.st" <<'PYEOF'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n]); data = raw[8 + n:]
def write(path, h):
    b = json.dumps(h).encode(); b += b" " * (-len(b) % 8)
    open(path, "wb").write(struct.pack("<Q", len(b)) + b + data)
cut = dict(h); del cut["transformer.h.1.mlp.c_fc.bias"]; write(sys.argv[2], cut)
bad = dict(h); e = dict(bad["transformer.h.0.attn.c_attn.bias"]); e["shape"] = [96, 2]; bad["transformer.h.0.attn.c_attn.bias"] = e
write(sys.argv[3], bad)
PYEOF
expect_fail "checkpoint missing a tensor" "transformer.h.1.mlp.c_fc.bias' is missing" -- fail4 --load "$tmpdir/cut.st"
expect_fail "checkpoint with a wrong shape" "c_attn.bias' has shape \[96, 2\], want \[192\]" -- fail4 --load "$tmpdir/shape.st"
expect_fail "unreadable data file" "cannot read data file" -- fail4 --data "$tmpdir/none.txt"
printf 'abc' >"$tmpdir/short.txt"
expect_fail "data file too short" "too few" -- fail4 --data "$tmpdir/short.txt"
finish
