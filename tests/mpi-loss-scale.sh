#!/bin/sh
# Loss scaling (issue 37; Megatron-LM's flags and rules, src/exec/loss_scale.c)
# with 16-bit GEMM operands (the cpu backend rounds them to nearest even):
# bf16 keeps fp32's exponent range, so a constant power-of-two scale
# changes no rounding and --bf16 --loss-scale 1024 gives --bf16's losses
# and gradients bit for bit (a missing unscale would change them, also
# where Adam's eps is large and nothing is clipped); fp16's range is small,
# so Megatron's 2^32 start overflows the gradients and the first steps are
# skipped while the scale backs off, as in Megatron's own fp16 logs.  An
# injected overflow (MK_TEST_GRAD_INF=RANK:STEP: that rank's gradient norm
# reads inf) skips the step on every rank alike: no update (the checkpoint
# after it is the one before it), the scale backs off after --hysteresis
# overflows, --json and the log line say so, and a 4-rank tp2 x pp2 run
# and a dp2 ZeRO-3 run with the overflow on their last rank give the
# one-rank run's losses.  As in Megatron-LM a skipped step moves neither the
# lr schedule nor Adam's step count, and the checkpoint keeps how many were
# skipped (metadata skipped_steps).  The scaler's state is saved: 4 + 4 steps
# through a checkpoint are the 8-step run (a malformed state is exit 2).
# Flags that would do nothing are exit 2.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/mpi-exec-lib.sh"
PY=${PYTHON:-python3}
one() { "$MERAK" run --gbs 8 --steps 4 --lr-decay-iters 4 --json "$@"; }
field() { "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2]))' "$1" "$2"; }
one >"$tmpdir/fp32.json" 2>/dev/null || { echo "FAIL: the fp32 run"; exit 1; }
check "fp32: no loss_scale field" test "$(field "$tmpdir/fp32.json" loss_scale)" = None
one --bf16 --adam-eps 0.5 --clip-grad 0 --dump-grads "$tmpdir/gb.bin" >"$tmpdir/bf16.json" 2>/dev/null
one --bf16 --adam-eps 0.5 --clip-grad 0 --loss-scale 1024 --dump-grads "$tmpdir/gs.bin" >"$tmpdir/bf16s.json" 2>/dev/null
check "--bf16 --loss-scale 1024 (Adam eps 0.5, no clipping): --bf16's losses bit for bit" \
  test -n "$(losses_of "$tmpdir/bf16s.json")" -a "$(losses_of "$tmpdir/bf16s.json")" = "$(losses_of "$tmpdir/bf16.json")"
check "... a constant scale of 1024 reported" test "$(field "$tmpdir/bf16s.json" loss_scale)" = 1024.0
check "--dump-grads under a loss scale: the unscaled gradients" cmp -s "$tmpdir/gs.bin" "$tmpdir/gb.bin"
check "bf16's losses are not fp32's (the operands are rounded)" \
  test "$(losses_of "$tmpdir/bf16.json")" != "$(losses_of "$tmpdir/fp32.json")"
"$MERAK" run --gbs 8 --steps 8 --lr-decay-iters 4 --json --fp16 >"$tmpdir/fp16.json" 2>/dev/null
check "--fp16 from Megatron's 2^32: fp16 gradients overflow, steps skipped, the scale backs off (skipped \
$(field "$tmpdir/fp16.json" skipped_steps), scale $(field "$tmpdir/fp16.json" loss_scale))" "$PY" -c '
import json, sys; d = json.load(open(sys.argv[1])); assert d["skipped_steps"] >= 1 and d["loss_scale"] < 2**32' "$tmpdir/fp16.json"
S="--fp16 --initial-loss-scale 65536"
one $S >"$tmpdir/f16.json" 2>"$tmpdir/f16.err"
check "--fp16 from 65536: no step skipped" test "$(field "$tmpdir/f16.json" skipped_steps)" = 0
# Megatron's gradient buffers: fp16 for --fp16 (each accumulation and the reduced sum rounded to fp16, so an
# overflow there is real), fp32 with --accumulate-allreduce-grads-in-fp32 and for bf16 (Megatron forces it)
check "--fp16: fp16 gradient buffers in --json" test "$(field "$tmpdir/f16.json" grads)" = fp16
one $S --accumulate-allreduce-grads-in-fp32 --dump-grads "$tmpdir/g32.bin" >"$tmpdir/f16a.json" 2>/dev/null
one $S --dump-grads "$tmpdir/g16.bin" >/dev/null 2>/dev/null
check "... fp32 with --accumulate-allreduce-grads-in-fp32, and for bf16" \
  test "$(field "$tmpdir/f16a.json" grads)" = fp32 -a "$(field "$tmpdir/bf16.json" grads)" = fp32
grads_fp16() { # DUMP SCALE: every gradient times the step's loss scale (a power of two) is an fp16 value
  "$PY" -c '
import struct, sys, numpy as np
b = open(sys.argv[1], "rb").read(); assert b[:8] == b"MKGRAD1\n"
n, pos, vals = struct.unpack_from("<i", b, 8)[0], 12, []
for _ in range(n):
    ln = struct.unpack_from("<i", b, pos)[0]; pos += 4 + ln
    m = struct.unpack_from("<q", b, pos)[0]; pos += 8
    vals.append(np.frombuffer(b, np.float32, m, pos)); pos += 4 * m
v = np.concatenate(vals) * np.float32(float(sys.argv[2]))
assert np.all(np.isfinite(v)) and np.any(v != 0)
sys.exit(0 if np.array_equal(v.astype(np.float16).astype(np.float32), v) else 1)' "$1" "$2"
}
check "fp16 buffers: the first step's scaled gradients are fp16 values" grads_fp16 "$tmpdir/g16.bin" 65536
check "... and with --accumulate-allreduce-grads-in-fp32 they are not" \
  test "$(grads_fp16 "$tmpdir/g32.bin" 65536 2>/dev/null; echo $?)" = 1
# ... held 16 bits a value (src/exec/exec_g16.c) and reduced so: a rank's weights, gradients and optimizer state
# are merak sim's to the byte (2 bytes a parameter of gradients; 4 with fp32 buffers), one rank, dp 2, and dp 2
# with ZeRO-1 (the whole 16-bit buffer reduce-scattered in place, the fp32 moments sharded); dp 2 sums them in
# fp16 (an MPI sum rounded after each addition: test_half), no ZeRO and ZeRO-1 alike bit for bit (a sum of two
# is rounded once either way), one rank's losses within 1e-5; ZeRO-2/3 hold their gradient pieces 16-bit (the
# per-layer buffers stay fp32: the state is bf16's less 2 bytes a piece's parameter) and reduce them in fp16
state_is_sims() { # RUN.json SIM-FLAGS...: the run's state bytes are the simulator's weights + grads + optimizer
  f=$1; shift
  "$MERAK" sim --model gpt-tiny --cluster ideal --gbs 8 --json "$@" 2>/dev/null | "$PY" -c '
import json, sys
m = json.load(sys.stdin)["memory_breakdown"]; r = json.load(open(sys.argv[1]))["state_memory_bytes"]
s = [int(x["weights"] + x["grads"] + x["optimizer"]) for x in m]
print("  run", r, "sim", s); sys.exit(r != s)' "$f"
}
check "fp16 buffers, one rank: the state bytes merak sim counts" state_is_sims "$tmpdir/f16.json" --dtype fp16
check "... with --accumulate-allreduce-grads-in-fp32: fp32 buffers, as sim counts them" \
  state_is_sims "$tmpdir/f16a.json" --dtype fp16 --grad-reduce-dtype fp32
for z in 0 1; do
  timeout 120 "$MPIEXEC" $MPIEXEC_FLAGS -n 2 "$MERAK" run --gbs 8 --steps 4 --lr-decay-iters 4 --json $S --dp 2 \
    --zero $z >"$tmpdir/d2z$z.json" 2>"$tmpdir/err" </dev/null || cat "$tmpdir/err"
  check "fp16 buffers, dp 2, ZeRO-$z: the state bytes merak sim counts" \
    state_is_sims "$tmpdir/d2z$z.json" --dtype fp16 --dp 2 --zero $z
  check "fp16 buffers, dp 2, ZeRO-$z: one rank's losses (1e-5)" same_losses "$tmpdir/d2z$z.json" "$tmpdir/f16.json"
done
check "fp16 buffers, dp 2: ZeRO-1's losses are no ZeRO's, bit for bit" \
  test -n "$(losses_of "$tmpdir/d2z0.json")" -a "$(losses_of "$tmpdir/d2z0.json")" = "$(losses_of "$tmpdir/d2z1.json")"
P1=$("$MERAK" sim --model gpt-tiny --cluster ideal --gbs 8 --json --dtype fp16 2>/dev/null | "$PY" -c '
import json, sys; print(int(json.load(sys.stdin)["memory_breakdown"][0]["weights"]) // 2)') # parameters (16-bit weights)
for z in 2 3; do
  for t in fp16 bf16; do
    f="--bf16"; [ $t = bf16 ] || f=$S
    timeout 120 "$MPIEXEC" $MPIEXEC_FLAGS -n 2 "$MERAK" run --gbs 8 --steps 4 --lr-decay-iters 4 --json $f --dp 2 \
      --zero $z >"$tmpdir/d2z$z$t.json" 2>"$tmpdir/err" </dev/null || cat "$tmpdir/err"
  done
  check "fp16 buffers, dp 2, ZeRO-$z: one rank's losses (1e-5)" same_losses "$tmpdir/d2z${z}fp16.json" "$tmpdir/f16.json"
  check "fp16 buffers, dp 2, ZeRO-$z: bf16's state less 2 bytes a piece's parameter ($P1 / 2 of them)" "$PY" -c '
import json, sys
f, b = (json.load(open(x))["state_memory_bytes"][0] for x in sys.argv[1:3])
print("  fp16", f, "bf16", b); sys.exit(b - f != 2 * int(sys.argv[3]) // 2)' "$tmpdir/d2z${z}fp16.json" \
    "$tmpdir/d2z${z}bf16.json" "$P1"
done
# an overflow at step index 1 on rank 0
MK_TEST_GRAD_INF=0:1 one $S --hysteresis 1 >"$tmpdir/inf1.json" 2>"$tmpdir/inf1.err"
check "an overflow with --hysteresis 1: skipped_steps 1, the scale halved to 32768" \
  test "$(field "$tmpdir/inf1.json" skipped_steps)" = 1 -a "$(field "$tmpdir/inf1.json" loss_scale)" = 32768.0
check "the log line says so" grep -q "step    2/4 .*loss scale 32768  skipped: inf/NaN gradients" "$tmpdir/inf1.err"
before_after() { # the first loss equal, the third not
  set -- $(losses_of "$1") "|" $(losses_of "$2")
  test "$1" = "$6" -a "$3" != "$8" -a "$5" = "|"
}
check "the step before it is the run's without it, the ones after differ" before_after "$tmpdir/inf1.json" "$tmpdir/f16.json"
MK_TEST_GRAD_INF=0:1 one $S >"$tmpdir/inf2.json" 2>/dev/null
check "with the default --hysteresis 2 one overflow skips and keeps the scale" \
  test "$(field "$tmpdir/inf2.json" skipped_steps)" = 1 -a "$(field "$tmpdir/inf2.json" loss_scale)" = 65536.0
# a skipped step changes no weight and no Adam moment
MK_TEST_GRAD_INF=0:1 "$MERAK" run --gbs 8 --steps 2 --lr-decay-iters 4 $S --save "$tmpdir/skip.st" 2>/dev/null
"$MERAK" run --gbs 8 --steps 1 --lr-decay-iters 4 $S --save "$tmpdir/one.st" 2>/dev/null
check "two steps with the second skipped: the checkpoint of one step (weights and Adam state)" \
  same_checkpoints "$tmpdir/skip.st" "$tmpdir/one.st"
# Megatron-LM's skipped step moves neither the lr schedule nor Adam's step count: the step after it runs at
# the lr it would have had (warm-up: one lr per update), and a resume needs the count (metadata skipped_steps)
lr_of() { sed -n "s|^step *$2/[0-9]* .* lr \([^ ]*\) .*|\1|p" "$1"; }
check "the skipped step 2 and step 3 at one lr ($(lr_of "$tmpdir/inf1.err" 2)), step 4 at step 3's of a run without the skip" \
  test -n "$(lr_of "$tmpdir/inf1.err" 2)" -a "$(lr_of "$tmpdir/inf1.err" 2)" = "$(lr_of "$tmpdir/inf1.err" 3)" -a \
  "$(lr_of "$tmpdir/inf1.err" 4)" = "$(lr_of "$tmpdir/f16.err" 3)" -a "$(lr_of "$tmpdir/f16.err" 2)" != "$(lr_of "$tmpdir/f16.err" 3)"
check "the checkpoint after the skip says skipped_steps 1" "$PY" -c '
import sys; sys.path.insert(0, sys.argv[1]); import st_read
meta, _ = st_read.read(sys.argv[2]); assert meta.get("skipped_steps") == "1", meta' "$top_srcdir/tests" "$tmpdir/skip.st"
"$MERAK" run --gbs 8 --steps 2 --lr-decay-iters 4 $S --load "$tmpdir/skip.st" --json >"$tmpdir/skip22.json" 2>/dev/null
last2() { losses_of "$1" | awk '{print $(NF-1), $NF}'; }
check "2 steps with a skip, saved, 2 more from the file: the 4-step run's last losses" \
  test -n "$(last2 "$tmpdir/skip22.json")" -a "$(last2 "$tmpdir/skip22.json")" = "$(last2 "$tmpdir/inf2.json")"
"$PY" "$top_srcdir/tests/st_edit.py" "$tmpdir/skip.st" "$tmpdir/noskip.st" "--meta=skipped_steps=0"
"$MERAK" run --gbs 8 --steps 2 --lr-decay-iters 4 $S --load "$tmpdir/noskip.st" --json >"$tmpdir/noskip.json" 2>/dev/null
check "... which the count decides (the same file saying 0 gives others)" \
  test -n "$(last2 "$tmpdir/noskip.json")" -a "$(last2 "$tmpdir/noskip.json")" != "$(last2 "$tmpdir/inf2.json")"
for bad in 3 -1 x 99999999999999999999; do
  "$PY" "$top_srcdir/tests/st_edit.py" "$tmpdir/skip.st" "$tmpdir/bad.st" "--meta=skipped_steps=$bad"
  expect_fail "skipped_steps '$bad' refused" "bad.st: metadata 'skipped_steps' must be an integer in .0, 2. .the checkpoint's step." -- \
    "$MERAK" run --gbs 8 --steps 1 $S --load "$tmpdir/bad.st"
done
# an exact resume: the dynamic scaler's state is in the checkpoint (metadata loss_scaler); from 2^32 the
# scale is still backing off at step 4, so a resumed run that restarted it would skip other steps
R="--gbs 8 --lr-decay-iters 8 --fp16"
"$MERAK" run $R --steps 8 --json >"$tmpdir/r8.json" 2>/dev/null
"$MERAK" run $R --steps 4 --save "$tmpdir/r4.st" 2>/dev/null
"$MERAK" run $R --steps 4 --load "$tmpdir/r4.st" --json >"$tmpdir/r44.json" 2>/dev/null
last3() { losses_of "$1" | awk '{print $(NF-2), $(NF-1), $NF}'; }
check "4 steps, saved, 4 more from the file: the 8-step run's last losses and scale ($(field "$tmpdir/r44.json" loss_scale))" \
  test -n "$(last3 "$tmpdir/r44.json")" -a "$(last3 "$tmpdir/r44.json")" = "$(last3 "$tmpdir/r8.json")" -a \
  "$(field "$tmpdir/r44.json" loss_scale)" = "$(field "$tmpdir/r8.json" loss_scale)"
for bad in "abc" "0.5 0 2" "1024 -1 2" "1024 0 2 9" "1e400 0 1" "1024 0"; do
  "$PY" "$top_srcdir/tests/st_edit.py" "$tmpdir/r4.st" "$tmpdir/bad.st" "--meta=loss_scaler=$bad"
  expect_fail "loss_scaler '$bad' refused" "bad.st: metadata 'loss_scaler' must be 'SCALE GROWTH HYSTERESIS'" -- \
    "$MERAK" run $R --steps 1 --load "$tmpdir/bad.st"
done
# every rank skips alike: the overflow on the last rank only
mpi() { n=$1; shift; timeout 120 "$MPIEXEC" $MPIEXEC_FLAGS -n $n "$MERAK" run --gbs 8 --steps 4 --lr-decay-iters 4 --json "$@"; }
MK_TEST_GRAD_INF=3:1 mpi 4 --tp 2 --pp 2 $S --hysteresis 1 >"$tmpdir/tp.json" 2>"$tmpdir/tp.err"
check "tp2 x pp2, the overflow on rank 3: skipped on every rank, one rank's losses (1e-5)" \
  same_losses "$tmpdir/tp.json" "$tmpdir/inf1.json"
check "... and says so: skipped_steps 1" test "$(field "$tmpdir/tp.json" skipped_steps)" = 1
MK_TEST_GRAD_INF=1:1 mpi 2 --dp 2 --zero 3 $S --hysteresis 1 >"$tmpdir/z3.json" 2>"$tmpdir/z3.err"
check "dp2 ZeRO-3, the overflow on rank 1: one rank's losses (1e-5)" same_losses "$tmpdir/z3.json" "$tmpdir/inf1.json"
# flags that would do nothing, and bad values
expect_fail "fp32 with --loss-scale" "is for --fp16 and --bf16 runs" -- "$MERAK" run --steps 1 --loss-scale 1024
expect_fail "--loss-scale with a dynamic flag" "tunes the dynamic loss scale, and --loss-scale fixes it" -- \
  "$MERAK" run --steps 1 --fp16 --loss-scale 1024 --hysteresis 3
expect_fail "bf16 with --initial-loss-scale" "is for --fp16" -- "$MERAK" run --steps 1 --bf16 --initial-loss-scale 1024
expect_fail "a floor above the start" "min-loss-scale 4096 is above the initial loss scale 1024" -- \
  "$MERAK" run --steps 1 --fp16 --initial-loss-scale 1024 --min-loss-scale 4096
expect_fail "a scale below 1" "loss-scale must be from 1" -- "$MERAK" run --steps 1 --fp16 --loss-scale 0.5
expect_fail "--hysteresis 0" "hysteresis must be an integer >= 1" -- "$MERAK" run --steps 1 --fp16 --hysteresis 0
expect_fail "a bad overflow hook" "MK_TEST_GRAD_INF must be RANK:step" -- env MK_TEST_GRAD_INF=x "$MERAK" run --steps 1
finish
