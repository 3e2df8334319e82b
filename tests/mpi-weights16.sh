#!/bin/sh
# 16-bit weights over fp32 masters (issue 37, src/exec/exec_p16.c): a bf16
# run's layers read 16-bit weights, the optimizer updates fp32 masters.
# - the state a rank holds is Megatron-LM's: 2 + 4 + 12 bytes a parameter
#   without ZeRO (16-bit weights, fp32 gradients, masters and moments),
#   equal to `merak sim`'s weights + gradients + optimizer for the same plan
#   (one rank and tp 2 x pp 2); with ZeRO-1 (dp 4) 2 + 4 + 12/4, Megatron's
#   distributed optimizer's (the fp32 block goes, the masters are pieces,
#   the gradients reduce-scatter in place), merak sim's again;
# - ZeRO-1, -2 and -3 (16-bit all-gathers) give the one-rank bf16 loss
#   within 1e-5, and differ from the fp32 run;
# - a resumed run (the checkpoint holds the fp32 masters) continues bit for
#   bit, without ZeRO and with ZeRO-1;
# - DeepSeek-V3's score biases with ZeRO-1/2/3 in bf16 train as one rank,
#   and resume (every rank's whole copy, their masters sharded).
. "$top_srcdir/tests/lib.sh"
PY=${PYTHON:-python3}
A="--model gpt-tiny --gbs 8 --json"
mpi() { n=$1; shift; timeout 300 "$MPIEXEC" $MPIEXEC_FLAGS -n "$n" "$MERAK" run $A "$@" </dev/null 2>"$tmpdir/err"; }
get() { # get FILE KEY [INDEX]
  "$PY" -c 'import json,sys; v=json.load(open(sys.argv[1]))[sys.argv[2]]; print(v[int(sys.argv[3])] if len(sys.argv) > 3 else v)' \
    "$@"; }
near() { "$PY" -c 'import sys; a, b, t = map(float, sys.argv[1:]); sys.exit(not abs(a - b) <= t * abs(b))' "$@"; }

mpi 1 --steps 3 >"$tmpdir/f32.json" || { echo "FAIL: fp32 run"; cat "$tmpdir/err"; exit 1; }
mpi 1 --steps 3 --bf16 >"$tmpdir/b1.json" || { echo "FAIL: bf16 run"; cat "$tmpdir/err"; exit 1; }
s32=$(get "$tmpdir/f32.json" state_memory_bytes 0) s16=$(get "$tmpdir/b1.json" state_memory_bytes 0)
P=$((s32 / 16))
check "fp32 state is 16 bytes a parameter ($s32 = 16 x $P)" test "$s32" = $((16 * P))
check "bf16 state is 18 bytes a parameter: $s16 = 18 x $P" test "$s16" = $((18 * P))
# merak sim's weights + gradients + optimizer of stage ST: simstate ST FLAGS...
simstate() { st=$1; shift; "$MERAK" sim --model gpt-tiny --gbs 8 --cluster ideal --json "$@" 2>"$tmpdir/err" |
  "$PY" -c 'import json,sys; b=json.load(sys.stdin)["memory_breakdown"][int(sys.argv[1])]
print(int(b["weights"] + b["grads"] + b["optimizer"]))' "$st"; }
sim=$(simstate 0 --dtype bf16)
check "merak sim counts the same bf16 state ($sim)" test "$sim" = "$s16"

mpi 4 --steps 3 --bf16 --tp 2 --pp 2 --mbs 2 >"$tmpdir/tp.json" || cat "$tmpdir/err"
for st in 0 1; do
  r=$(get "$tmpdir/tp.json" state_memory_bytes $st)
  s=$(simstate $st --dtype bf16 --tp 2 --pp 2 --mbs 2)
  check "tp 2 x pp 2, stage $st: bf16 state $r within 0.5% of merak sim's $s" near "$r" "$s" 0.005
done

b1=$(get "$tmpdir/b1.json" losses 2) f1=$(get "$tmpdir/f32.json" losses 2)
check "bf16's loss ($b1) is not fp32's ($f1)" test "$b1" != "$f1"
for z in 1 2 3; do
  mpi 4 --steps 3 --bf16 --dp 4 --zero $z >"$tmpdir/z$z.json" || cat "$tmpdir/err"
  check "bf16 dp 4 ZeRO-$z: loss $(get "$tmpdir/z$z.json" losses 2) within 1e-5 of one rank's $b1" \
    near "$(get "$tmpdir/z$z.json" losses 2)" "$b1" 0.00001
done
z1=$(get "$tmpdir/z1.json" state_memory_bytes 0)
check "bf16 dp 4 ZeRO-1 state: 2 + 4 + 12/4 bytes a parameter ($z1 = $((9 * P)))" test "$z1" = $((9 * P))
sz1=$(simstate 0 --dtype bf16 --dp 4 --zero 1)
check "merak sim counts the same ZeRO-1 state ($sz1)" test "$sz1" = "$z1"

for z in 0 1; do
  mpi 2 --dp 2 --zero $z --bf16 --steps 4 >"$tmpdir/s.json" || cat "$tmpdir/err"
  mpi 2 --dp 2 --zero $z --bf16 --steps 2 --save "$tmpdir/ck$z.safetensors" >/dev/null || cat "$tmpdir/err"
  mpi 2 --dp 2 --zero $z --bf16 --steps 2 --load "$tmpdir/ck$z.safetensors" >"$tmpdir/r.json" || cat "$tmpdir/err"
  check "ZeRO-$z bf16 resumed from its fp32 masters: step 4's loss $(get "$tmpdir/r.json" losses 1) bit for bit" \
    test "$(get "$tmpdir/r.json" losses 1)" = "$(get "$tmpdir/s.json" losses 3)"
done

# DeepSeek-V3's score biases with ZeRO in bf16: the router reads every rank's whole copy (Megatron-Core's
# expert_bias buffer), their sharded fp32 masters follow it (src/exec/exec_ep.c).  dp 2 with ZeRO-1 trains
# as dp 2 without ZeRO, and ZeRO-3 as ZeRO-2, bit for bit (losses, every tensor, the score biases equal and
# moved: each pair reduces the same sums), and both pairs as one rank within 1e-4: the ranks' gradient sums
# add in another order than one rank's (ZeRO-0/1 all-reduce the accumulated block, ZeRO-2/3 reduce-scatter
# each micro-batch's), and how far that moves the loss is the BLAS kernels' and the router's (a near tie in
# an expert choice can flip: with OpenBLAS's Prescott kernels all four met one rank bit for bit, with
# Haswell's ZeRO-0/1 differ by 1.5e-5 at step 3).  A ZeRO-3 run resumed from ZeRO-2's step-3 checkpoint
# ends with the biases of ZeRO-2's run through (pulled from the loaded masters).
. "$top_srcdir/tests/mpi-exec-lib.sh"
DS="--model deepseek-tiny --gbs 8 --lr-warmup-iters 0 --lr-decay-iters 5 --json --bf16"
"$MERAK" run $DS --steps 3 >"$tmpdir/d1.json" 2>"$tmpdir/err" || cat "$tmpdir/err"
ds2() { timeout 300 "$MPIEXEC" $MPIEXEC_FLAGS -n 2 "$MERAK" run $DS --dp 2 "$@" </dev/null 2>"$tmpdir/err" || cat "$tmpdir/err"; }
same_biases() {
  "$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import st_read
a = st_read.read(sys.argv[2])[1]; b = st_read.read(sys.argv[3])[1]
k = [n for n in a if n.endswith("e_score_correction_bias")]
assert k and all(a[n][1] == b[n][1] for n in k) and max(abs(x) for n in k for x in a[n][1]) > 5e-4' \
    "$top_srcdir/tests" "$1" "$2"
}
same_tensors() {
  "$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import st_read
_, a = st_read.read(sys.argv[2]); _, b = st_read.read(sys.argv[3])
assert a.keys() == b.keys() and all(a[k] == b[k] for k in a), [k for k in a if a[k] != b.get(k)][:3]' \
    "$top_srcdir/tests" "$1" "$2"
}
for pair in "0 1" "2 3"; do
  r=${pair% *} z=${pair#* }
  ds2 --steps 3 --zero $r --save "$tmpdir/r$r.st" >"$tmpdir/r$r.json"
  a=$(losses_of "$tmpdir/d1.json") b=$(losses_of "$tmpdir/r$r.json")
  check "deepseek-tiny bf16, dp 2, ZeRO-$r: one rank's losses within 1e-4 ($b; $a)" "$PY" -c '
import sys; a, b = [list(map(float, x.split())) for x in sys.argv[1:]]
sys.exit(not (len(a) == len(b) == 3 and all(abs(x - y) <= 1e-4 * abs(x) for x, y in zip(a, b))))' "$a" "$b"
  ds2 --steps 3 --zero $z --save "$tmpdir/dz.st" >"$tmpdir/dz.json"
  a=$(losses_of "$tmpdir/r$r.json") b=$(losses_of "$tmpdir/dz.json")
  check "deepseek-tiny bf16, dp 2, ZeRO-$z: ZeRO-$r's losses ($b)" test -n "$b" -a "$a" = "$b"
  check "  ZeRO-$z: ZeRO-$r's tensors, bit for bit" same_tensors "$tmpdir/r$r.st" "$tmpdir/dz.st"
  check "  ZeRO-$z: the score biases equal, moved" same_biases "$tmpdir/r$r.st" "$tmpdir/dz.st"
done
ds2 --steps 5 --zero 2 --save "$tmpdir/u.st" >/dev/null
ds2 --steps 2 --zero 3 --load "$tmpdir/r2.st" --save "$tmpdir/r3.st" >/dev/null
check "deepseek-tiny bf16, ZeRO-3 resumed at step 3: step 5's score biases as ZeRO-2's run through" \
  same_biases "$tmpdir/u.st" "$tmpdir/r3.st"
finish
