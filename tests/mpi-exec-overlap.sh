#!/bin/sh
# Sub-pipelined TP (--tp-overlap 1, 2; 3 runs as 2) equals the one-rank run:
# losses within 1e-5 relative, step-1 gradients within 1e-5 per tensor, for
# sequence splits (mbs 1) and batch splits (mbs 2), with pipelines, every
# schedule family and recompute; and the split really happens (twice the
# TP all-reduces of the block layers in the trace).
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/mpi-exec-lib.sh"
make_reference
equiv 1 1 2 --tp-overlap 1
equiv 1 1 2 --tp-overlap 2
equiv 1 1 2 --tp-overlap 1 --mbs 2
equiv 1 1 2 --tp-overlap 2 --mbs 2 --recompute none
equiv 1 1 4 --tp-overlap 2 --mbs 2
equiv 1 2 2 --tp-overlap 2 --schedule merak --recompute stage-aware:0.5
equiv 1 2 2 --tp-overlap 1 --schedule zb-h1 --mbs 2
equiv 1 2 2 --tp-overlap 2 --schedule interleaved --recompute full
equiv 2 1 2 --tp-overlap 2 --mbs 2 --schedule gpipe
equiv 1 2 2 --tp-overlap 3 --schedule merak-pre --recompute selective

# the split is real: per micro-batch, each attention/MLP layer's forward and
# backward all-reduce becomes two, and so does the recomputed attention's
# (full recompute rebuilds each block's MLP input by the attention's whole
# forward, exec_stream.c regrow_input; gpt-tiny: 24 -> 44 per micro-batch)
ars() { "$PYTHON" -c "import json,sys; j=json.load(open(sys.argv[1])); ev=j['traceEvents'] if isinstance(j,dict) else j
print(sum(1 for e in ev if e.get('name')=='AR.tp' and e.get('pid')==0))" "$1"; }
for ov in 0 2; do
  "$MPIEXEC" $MPIEXEC_FLAGS -n 2 "$MERAK" run --tp 2 --gbs 4 --steps 2 --tp-overlap $ov \
    --trace "$tmpdir/tr$ov.json" --json >/dev/null 2>"$tmpdir/tr.err" || cat "$tmpdir/tr.err"
done
check "AR.tp events per step on rank 0: $(ars "$tmpdir/tr0.json") without overlap, $(ars "$tmpdir/tr2.json") with level 2" \
  test "$(ars "$tmpdir/tr0.json")" = 96 -a "$(ars "$tmpdir/tr2.json")" = 176

# --no-overlap-grad-reduce: the same sums, started at REDUCE_GRADS.  Prints
# how many AR.dp of rank 0's last step start before its last backward ends.
early() { "$PYTHON" -c "import json,sys; j=json.load(open(sys.argv[1])); ev=j['traceEvents'] if isinstance(j,dict) else j
ev=[e for e in ev if e.get('pid')==0 and e.get('ph')=='X']
b=max(e['ts']+e['dur'] for e in ev if e['name'].startswith('B'))
print(sum(1 for e in ev if e['name']=='AR.dp' and e['ts']<b))" "$1"; }
for lay in "2 1" "2 2"; do
  set -- $lay
  for ov in overlap no-overlap; do
    "$MPIEXEC" $MPIEXEC_FLAGS -n $(($1 * $2)) "$MERAK" run --dp $1 --pp $2 $RUN_COMMON --$ov-grad-reduce \
      --dump-grads "$tmpdir/g-$ov.bin" --trace "$tmpdir/t-$ov.json" >"$tmpdir/o-$ov.json" 2>"$tmpdir/o.err" ||
      cat "$tmpdir/o.err"
  done
  check "dp $1 pp $2: same losses bitwise without DP overlap" \
    test -n "$(losses_of "$tmpdir/o-overlap.json")" -a "$(losses_of "$tmpdir/o-overlap.json")" = "$(losses_of "$tmpdir/o-no-overlap.json")"
  check "dp $1 pp $2: same step-1 gradients bitwise" cmp -s "$tmpdir/g-overlap.bin" "$tmpdir/g-no-overlap.bin"
  check "dp $1 pp $2: DP all-reduces inside the backward with overlap ($(early "$tmpdir/t-overlap.json")), none without" \
    test "$(early "$tmpdir/t-overlap.json")" -gt 0 -a "$(early "$tmpdir/t-no-overlap.json")" = 0
done
finish
