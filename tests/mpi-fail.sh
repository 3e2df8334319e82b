#!/bin/sh
# Failures end every rank quickly with one message: a rank that dies, a
# device error on one rank, a NaN loss, a missing or mismatched checkpoint, an unreadable data file.
. "$top_srcdir/tests/lib.sh"
PY=${PYTHON:-python3}
R="$MPIEXEC $MPIEXEC_FLAGS"
t0=$(date +%s)
MK_TEST_FAIL=5:2 timeout 10 $R -n 8 "$MERAK" run --dp 2 --pp 2 --tp 2 --gbs 8 --steps 20 >"$tmpdir/out" 2>"$tmpdir/err"
rc=$?; dt=$(( $(date +%s) - t0 ))
check "rank 5 dies at step 3: every rank ends within 10 s (rc=$rc, ${dt}s)" test $rc -ne 0 -a $rc -ne 124 -a $dt -le 10
check "rank 5 dies: a message" grep -q "rank 5" "$tmpdir/err"

# a device error on one rank (as the CUDA backend reports through its status
# entry): every rank stops after that step with rank 0's one message, exit 1,
# and no checkpoint is written over by the broken step
MK_TEST_DEVICE_FAIL=3:1 timeout 20 $R -n 4 "$MERAK" run --dp 2 --pp 2 --gbs 8 --steps 5 --save "$tmpdir/d.st" \
  >"$tmpdir/out" 2>"$tmpdir/err"
rc=$?
check "device error on rank 3: rc=$rc (1)" test $rc -eq 1
check "device error: one message naming the rank and the step" \
  test "$(grep -c '^merak run: rank 3: testing: a device error after step 1$' "$tmpdir/err")" -eq 1
check "device error: no checkpoint written" test ! -e "$tmpdir/d.st"
# ... and one while the save copies the shards out (step -1: outside a step)
MK_TEST_DEVICE_FAIL=1:-1 timeout 20 $R -n 2 "$MERAK" run --dp 2 --gbs 4 --steps 1 --save "$tmpdir/d.st" \
  >"$tmpdir/out" 2>"$tmpdir/err"
rc=$?
check "device error during the save: rc=$rc (1)" test $rc -eq 1
check "device error during the save: rank 1's message" grep -q '^merak run: rank 1: testing: a device error' "$tmpdir/err"
check "device error during the save: no checkpoint written" test ! -e "$tmpdir/d.st"

# a checkpoint is named good only once a step after it finished with a finite loss
MK_TEST_NAN=3 timeout 20 $R -n 4 "$MERAK" run --dp 2 --pp 2 --gbs 8 --steps 5 --save "$tmpdir/c.st" \
  --save-interval 2 >"$tmpdir/out" 2>"$tmpdir/err"
rc=$?
check "NaN loss: rc=$rc (non-zero, no timeout)" test $rc -ne 0 -a $rc -ne 124
check "NaN loss: one message naming the step and the last good checkpoint" \
  test "$(grep -c 'step 4: the loss is nan; the last good checkpoint is .*c.st (step 2)$' "$tmpdir/err")" -eq 1
check "NaN loss: the last good checkpoint is intact" "$PY" "$top_srcdir/tests/st_read.py" "$tmpdir/c.st" --check=transformer.wte.weight=256x64
check "  ... and holds step 2" "$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import st_read
assert st_read.read(sys.argv[2])[0]["step"] == "2"' "$top_srcdir/tests" "$tmpdir/c.st"
cp "$tmpdir/c.st" "$tmpdir/keep.st"
# not_good DESC NAN_AT FILE STEP [run flags]: a NaN at step index NAN_AT names
# FILE (step STEP) as not known good, and no checkpoint as the last good one
not_good() {
  desc=$1; at=$2; f=$3; st=$4; shift 4
  MK_TEST_NAN=$at timeout 20 $R -n 4 "$MERAK" run --dp 2 --pp 2 --gbs 8 "$@" >"$tmpdir/out" 2>"$tmpdir/err"
  check "$desc" grep -q "step $((at + 1)): the loss is nan; .*$f (step $st) is not known good (this was the first step after it)\$" \
    "$tmpdir/err"
  check "  ... and no 'last good checkpoint'" test -z "$(grep 'last good' "$tmpdir/err")"
}
not_good "NaN in the first step after loading: the loaded checkpoint is not called good" 2 keep.st 2 \
  --steps 2 --load "$tmpdir/keep.st" --save "$tmpdir/c2.st" --save-interval 1
cp "$tmpdir/keep.st" "$tmpdir/c3.st"
not_good "NaN right after an interval save over the loaded file: only that save is named, not as good" 3 c3.st 3 \
  --steps 3 --load "$tmpdir/c3.st" --save "$tmpdir/c3.st" --save-interval 1
# weights that are NaN themselves (a file without checksums, written elsewhere)
"$PY" "$top_srcdir/tests/st_edit.py" "$tmpdir/keep.st" "$tmpdir/nan.st" --nan=transformer.ln_f.weight --no-crc
timeout 20 $R -n 4 "$MERAK" run --dp 2 --pp 2 --gbs 8 --steps 2 --load "$tmpdir/nan.st" >"$tmpdir/out" 2>"$tmpdir/err"
rc=$?
check "NaN weights: rc=$rc (1)" test $rc -eq 1
check "NaN weights: the checkpoint is not called good" \
  grep -q 'step 3: the loss is nan; .*nan.st (step 2) is not known good (this was the first step after it)$' "$tmpdir/err"
check "NaN weights: the file without checksums gets a note" grep -q 'note: .*nan.st has no checksums' "$tmpdir/err"

fail4() { timeout 20 $R -n 4 "$MERAK" run --dp 2 --pp 2 --gbs 8 --steps 1 "$@"; }
expect_fail "missing checkpoint" "cannot read checkpoint" -- fail4 --load "$tmpdir/none.st"
expect_fail "checkpoint of another model" "model mismatch" -- fail4 --load "$tmpdir/c.st" --hidden-size 128
"$PY" "$top_srcdir/tests/st_edit.py" "$tmpdir/c.st" "$tmpdir/cut.st" --drop=transformer.h.1.mlp.c_fc.bias
"$PY" "$top_srcdir/tests/st_edit.py" "$tmpdir/c.st" "$tmpdir/shape.st" --shape=transformer.h.0.attn.c_attn.bias=96x2
expect_fail "checkpoint missing a tensor" "transformer.h.1.mlp.c_fc.bias' is missing" -- fail4 --load "$tmpdir/cut.st"
expect_fail "checkpoint with a wrong shape" "c_attn.bias' has shape \[96, 2\], want \[192\]" -- fail4 --load "$tmpdir/shape.st"
expect_fail "unreadable data file" "cannot read data file" -- fail4 --data "$tmpdir/none.txt"
printf 'abc' >"$tmpdir/short.txt"
expect_fail "data file too short" "too few" -- fail4 --data "$tmpdir/short.txt"
finish
