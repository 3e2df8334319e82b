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
# backward all-reduce becomes two (gpt-tiny: 20 -> 36 per micro-batch)
ars() { "$PYTHON" -c "import json,sys; j=json.load(open(sys.argv[1])); ev=j['traceEvents'] if isinstance(j,dict) else j
print(sum(1 for e in ev if e.get('name')=='AR.tp' and e.get('pid')==0))" "$1"; }
for ov in 0 2; do
  "$MPIEXEC" $MPIEXEC_FLAGS -n 2 "$MERAK" run --tp 2 --gbs 4 --steps 2 --tp-overlap $ov \
    --trace "$tmpdir/tr$ov.json" --json >/dev/null 2>"$tmpdir/tr.err" || cat "$tmpdir/tr.err"
done
check "AR.tp events per step on rank 0: $(ars "$tmpdir/tr0.json") without overlap, $(ars "$tmpdir/tr2.json") with level 2" \
  test "$(ars "$tmpdir/tr0.json")" = 80 -a "$(ars "$tmpdir/tr2.json")" = 144
finish
