#!/bin/sh
# Mixed precision on the cpu backend (issue 37): --bf16 / --fp16 (or a plan's
# dtype) round the linears' GEMM operands to nearest even, the products
# summed in fp32; every layer's output, and the gradient at its input, is
# rounded to the 16-bit type where it becomes final, and what a layer keeps for its backward (its input, a
# dense layer's internals but the fp32 statistics) is kept 16-bit.
# gpt-tiny at sequence 256, 30 steps: "dtype" says which; the final loss is
# within 3% of the fp32 run's and not equal to it; tp 2 x pp 2 and dp 2
# with ZeRO-3 give the one-rank bf16 run's final loss within 1%; a 16-bit
# run recomputes exactly what its forward kept (recompute none and full
# train alike, bit for bit: gpt-tiny, llama-tiny, fused attention, moe-tiny,
# q/k norms, MLA, ring attention; selective as none, its attention's
# probabilities remade in the backward); the
# peak with the internals kept (recompute none) falls below 0.9 of fp32's;
# fp16 reports its loss scale
# (from 65536: Megatron's 2^32 skips the first ~10 steps here while it backs
# off, which the last check shows).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/mpi-exec-lib.sh"
PY=${PYTHON:-python3}
A="--model gpt-tiny --seq-length 256 --gbs 4 --steps 30 --json"
run1() { "$MERAK" run $A "$@" 2>"$tmpdir/err"; }
runb() { "$MERAK" run --seq-length 256 --gbs 4 --steps 10 --json --bf16 "$@" 2>"$tmpdir/err"; }
mpi() { n=$1; shift; timeout 300 "$MPIEXEC" $MPIEXEC_FLAGS -n $n "$MERAK" run $A "$@" 2>"$tmpdir/err"; }
final() { "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["losses"][-1])' "$1"; }
field() { "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2]))' "$1" "$2"; }
near() { "$PY" -c 'import sys; a, b, t = map(float, sys.argv[1:]); sys.exit(not abs(a - b) <= t * abs(b))' "$1" "$2" "$3"; }
run1 >"$tmpdir/fp32.json" || { echo "FAIL: the fp32 run"; cat "$tmpdir/err"; exit 1; }
f32=$(final "$tmpdir/fp32.json")
close_unequal() { test "$1" != "$2" && near "$1" "$2" 0.03; }
for t in "bf16" "fp16 --initial-loss-scale 65536"; do
  n=${t%% *}
  run1 --$t >"$tmpdir/$n.json" || { echo "FAIL: --$t"; cat "$tmpdir/err"; fails=$((fails + 1)); continue; }
  f=$(final "$tmpdir/$n.json")
  check "--$t: \"dtype\": \"$n\"" test "$(field "$tmpdir/$n.json" dtype)" = "$n"
  check "--$t: final loss $f within 3% of fp32's $f32, and not equal" close_unequal "$f" "$f32"
done
check "--fp16 reports its loss scale ($(field "$tmpdir/fp16.json" loss_scale), none skipped)" \
  test "$(field "$tmpdir/fp16.json" loss_scale)" = 65536.0 -a "$(field "$tmpdir/fp16.json" skipped_steps)" = 0
# Megatron's default start, 2^32, overflows fp16's gradients: the first steps are skipped until it backs off
run1 --fp16 >"$tmpdir/fp16d.json"
check "--fp16 from 2^32: $(field "$tmpdir/fp16d.json" skipped_steps) steps skipped, the scale down to \
$(field "$tmpdir/fp16d.json" loss_scale)" "$PY" -c '
import json, sys; d = json.load(open(sys.argv[1])); assert 1 <= d["skipped_steps"] < 30 and d["loss_scale"] < 2**32' \
  "$tmpdir/fp16d.json"
peak0() { "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["peak_memory_bytes"][0])' "$1"; }
for m in "gpt-tiny" "llama-tiny" "gpt-tiny --attention-backend fused" "moe-tiny" "llama-tiny --qk-layernorm" \
  "deepseek-tiny"; do
  rm -f "$tmpdir/none.json" "$tmpdir/full.json" "$tmpdir/sel.json"
  runb --model $m --recompute none >"$tmpdir/none.json" && runb --model $m --recompute full >"$tmpdir/full.json" &&
    runb --model $m --recompute selective >"$tmpdir/sel.json" || cat "$tmpdir/err"
  a=$(final "$tmpdir/none.json") b=$(final "$tmpdir/full.json") c=$(final "$tmpdir/sel.json")
  check "bf16 $m: recompute none and full train alike ($a, $b)" test -n "$a" -a "$a" = "$b"
  check "bf16 $m: recompute selective trains as none ($c)" test -n "$a" -a "$a" = "$c"
done
# selective recompute remakes each attention core's probabilities in its backward (gpt.h drop_core):
# fp32 and bf16 alike, with documents (--reset-attention-mask) and the sub-pipelined TP's halves, and
# its peak is none's less the probabilities (B nh T^2 a layer: 4 x 4 x 256^2 floats here, bf16 half)
sel() { "$MERAK" run --model gpt-tiny --seq-length 256 --mbs 4 --gbs 4 --steps 3 --json --recompute "$@" \
  2>"$tmpdir/err" | "$PY" -c 'import json,sys; d = json.load(sys.stdin); print(d["losses"][-1], d["peak_memory_bytes"][0])'; }
"$PY" "$top_srcdir/tests/megatron_write.py" "$tmpdir/docs" 3 400 5 40
for d in "" "--bf16" "--data-path $tmpdir/docs --reset-position-ids --reset-attention-mask"; do
  set -- $(sel none $d) $(sel selective $d)
  check "gpt-tiny ${d%% --reset-pos*}: selective trains as none ($1, $3), its peak $4 below none's $2" \
    test -n "$1" -a "$1" = "$3" -a "${4:-0}" -gt 0 -a "${4:-0}" -lt "${2:-0}"
done
sel2() { timeout 300 "$MPIEXEC" $MPIEXEC_FLAGS -n 2 "$MERAK" run --model llama-tiny --tp 2 --tp-overlap 2 --mbs 2 \
  --gbs 4 --steps 3 --json --recompute "$1" </dev/null 2>"$tmpdir/err" | "$PY" -c 'import json,sys
print(json.load(sys.stdin)["losses"][-1])'; }
a=$(sel2 none) b=$(sel2 selective)
check "llama-tiny, tp 2 with --tp-overlap 2: selective trains as none ($a, $b)" test -n "$a" -a "$a" = "$b"
# ring attention (cp 2) keeps q|k|v and the output 16-bit, its log-sum-exps fp32: none and full alike
cp2() { timeout 300 "$MPIEXEC" $MPIEXEC_FLAGS -n 2 "$MERAK" run --model llama-tiny --cp 2 --mbs 4 --gbs 8 --steps 4 \
  --bf16 --json --recompute "$1" </dev/null 2>"$tmpdir/err" | "$PY" -c 'import json,sys
print(json.load(sys.stdin)["losses"][-1])'; }
a=$(cp2 none) b=$(cp2 full)
check "bf16 llama-tiny, cp 2: recompute none and full train alike ($a, $b)" test -n "$a" -a "$a" = "$b"
# an MoE layer keeps its norm output, the slots' inputs and outputs and its expert side 16-bit too:
# what recompute none keeps beyond full's peak (the GEMMs' scratch alike in both) is at most 0.55 of
# fp32's (0.48; 0.66 with the expert side fp32.  Before the attention's probabilities and their
# gradient were 16-bit while a layer computes (kernels_attn16_cpu.c), full's peak held them fp32:
# 0.42, and 0.60 with the expert side fp32)
kept() { "$MERAK" run --model moe-tiny --seq-length 256 --mbs 4 --gbs 4 --steps 1 --json --recompute "$@" \
  2>"$tmpdir/err" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["peak_memory_bytes"][0])'; }
k32=$(( $(kept none) - $(kept full) )) k16=$(( $(kept none --bf16) - $(kept full --bf16) ))
check "moe-tiny: bf16 keeps $k16 bytes for its backward, at most 0.55 of fp32's $k32" \
  test $((k16 * 100)) -le $((k32 * 55))
M="--model gpt-tiny --seq-length 256 --recompute none --mbs 4 --gbs 8 --steps 2 --json"
"$MERAK" run $M >"$tmpdir/n32.json" 2>"$tmpdir/err" && "$MERAK" run $M --bf16 >"$tmpdir/n16.json" 2>"$tmpdir/err" ||
  cat "$tmpdir/err"
p16=$(peak0 "$tmpdir/n16.json") p32=$(peak0 "$tmpdir/n32.json")
check "bf16 keeps its activations 16-bit ($M): peak $p16 <= 0.9 of fp32's $p32" \
  test -n "$p16" -a -n "$p32" -a "${p16:-0}" -le $(( ${p32:-0} * 9 / 10 ))
b1=$(final "$tmpdir/bf16.json")
mpi 4 --tp 2 --pp 2 --bf16 >"$tmpdir/tp.json" || cat "$tmpdir/err"
check "bf16, tp 2 x pp 2: final loss $(final "$tmpdir/tp.json") within 1% of one rank's $b1" near "$(final "$tmpdir/tp.json")" "$b1" 0.01
mpi 2 --dp 2 --zero 3 --bf16 >"$tmpdir/z3.json" || cat "$tmpdir/err"
check "bf16, dp 2 ZeRO-3: final loss $(final "$tmpdir/z3.json") within 1% of one rank's $b1" near "$(final "$tmpdir/z3.json")" "$b1" 0.01
# a 16-bit run's pipeline sends its activations and their gradients 16-bit (Megatron-LM's p2p dtype):
# exact, since every layer's output, and the gradient at its input, is rounded to the run's type where it
# becomes final, so pp 2 trains as one rank bit for bit in bf16 (1f1b, and zb-v's two chunks a rank, sends both ways); fp16 within 1e-5 (its fp16 gradient
# buffers round each accumulation, and the tied embedding's two stages and zb-v's deferred weight
# gradients add in another order: a few 1e-7)
losses() { "$PY" -c 'import json,sys; print(" ".join("%.9f" % x for x in json.load(open(sys.argv[1]))["losses"]))' "$1"; }
P="--model gpt-tiny --seq-length 256 --gbs 4 --steps 4 --json"
for t in bf16 "fp16 --initial-loss-scale 65536"; do
  n=${t%% *}
  "$MERAK" run $P --$t >"$tmpdir/p1.json" 2>"$tmpdir/err" || cat "$tmpdir/err"
  for s in 1f1b zb-v; do
    timeout 300 "$MPIEXEC" $MPIEXEC_FLAGS -n 2 "$MERAK" run $P --$t --pp 2 --schedule $s >"$tmpdir/p2.json" \
      2>"$tmpdir/err" </dev/null || cat "$tmpdir/err"
    a=$(losses "$tmpdir/p1.json") b=$(losses "$tmpdir/p2.json")
    if [ "$n" = bf16 ]; then
      check "$n, pp 2 $s (16-bit sends): losses as one rank's, bit for bit ($b)" test -n "$a" -a "$a" = "$b"
    else
      check "$n, pp 2 $s (16-bit sends): losses within 1e-5 of one rank's ($b; $a)" "$PY" -c '
import sys; a, b = [list(map(float, x.split())) for x in sys.argv[1:]]
sys.exit(not (a and len(a) == len(b) and all(abs(x - y) <= 1e-5 * abs(x) for x, y in zip(a, b))))' "$a" "$b"
    fi
  done
done
# a zero-bubble schedule's B_IN -> B_W gradients wait 16-bit in a 16-bit run (gpt_act.c bw_convert): exact,
# since B_W reads them only as GEMM operands, which the 16-bit GEMMs round anyway, and the bias gradients
# are B_IN's; so gpt-tiny's zb-v above and an MoE layer's (its experts', shared expert's and router's
# output gradients) train as one rank bit for bit
P="--model moe-tiny --gbs 8 --steps 3 --json --bf16"
"$MERAK" run $P >"$tmpdir/m1.json" 2>"$tmpdir/err" || cat "$tmpdir/err"
for s in zb-h1 dualpipev; do
  timeout 300 "$MPIEXEC" $MPIEXEC_FLAGS -n 2 "$MERAK" run $P --pp 2 --schedule $s >"$tmpdir/m2.json" \
    2>"$tmpdir/err" </dev/null || cat "$tmpdir/err"
  a=$(losses "$tmpdir/m1.json") b=$(losses "$tmpdir/m2.json")
  check "bf16 moe-tiny, pp 2 $s (16-bit B_IN -> B_W gradients): losses as one rank's, bit for bit ($b)" \
    test -n "$a" -a "$a" = "$b"
done
finish
