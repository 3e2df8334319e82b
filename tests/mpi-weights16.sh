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
# - the router's score bias with ZeRO in a 16-bit run is refused (exit 2).
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

timeout 300 "$MPIEXEC" $MPIEXEC_FLAGS -n 2 "$MERAK" run --model deepseek-tiny --gbs 8 --dp 2 --zero 1 --bf16 --steps 1 \
  </dev/null >/dev/null 2>"$tmpdir/err"
rc=$?
check "the score bias with ZeRO-1 in bf16: exit 2 ($rc), one line" \
  test $rc = 2 -a "$(grep -c "expert bias" "$tmpdir/err")" = 1
finish
