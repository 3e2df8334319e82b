#!/bin/sh
# Megatron sequence parallelism in `merak run` (--sequence-parallel): the
# one-rank losses (3 steps, 1e-5 relative) and step-1 gradients (per tensor,
# 1e-5) for gpt-tiny and llama-tiny under dp x tp, pp, tp 4, recompute
# full (the default) / none / selective, a zero-bubble schedule (split backward),
# interleaving and ZeRO 1-3; the trace's AG.sp / RS.sp on the TP stream; a
# plan with "sequence_parallel": true; checkpoints across SP on and off;
# --tp-overlap with it and tp not dividing mbs*seq refused with one line.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/mpi-exec-lib.sh"
SP=--sequence-parallel
make_reference
equiv 2 1 2 $SP
equiv 2 2 2 $SP --zero 3
equiv 1 1 4 $SP --recompute none
equiv 1 2 2 $SP --schedule zb-h1 --recompute none
equiv 1 2 2 $SP --schedule interleaved --vpp 2 --recompute selective
equiv 2 1 2 $SP --zero 2 --recompute none

# traced: the SP collectives on the TP stream, no TP all-reduce of activations
mpin() { n=$1; shift; timeout 60 "$MPIEXEC" $MPIEXEC_FLAGS -n "$n" "$MERAK" run --json "$@"; }
mpi() { n=$1; shift; mpin "$n" --gbs 8 "$@"; }
expect_ok "traced run" mpi 2 --tp 2 $SP --steps 1 --trace "$tmpdir/t.json"
check "trace has AG.sp and RS.sp" sh -c "grep -q '\"AG.sp\"' '$tmpdir/t.json' && grep -q '\"RS.sp\"' '$tmpdir/t.json'"

# a plan with "sequence_parallel": true runs under --plan, with the reference losses
"$MERAK" plan --model gpt-tiny --gpus 4 --gbs 8 --dtype fp32 --top 1 --save-plan "$tmpdir/p.json" >/dev/null 2>&1
sed -e 's/"dp": [0-9]*/"dp": 2/' -e 's/"pp": [0-9]*/"pp": 1/' -e 's/"tp": [0-9]*/"tp": 2/' \
  -e 's/"vpp": [0-9]*/"vpp": 1/' -e 's/"micro_batch_size": [0-9]*/"micro_batch_size": 1/' \
  -e 's/"micro_batches": [0-9]*/"micro_batches": 4/' -e 's/"schedule": "[^"]*"/"schedule": "1f1b"/' \
  -e 's/"tp_overlap": [0-9]*/"tp_overlap": 0/' -e 's/"sequence_parallel": false/"sequence_parallel": true/' \
  -e '/"stage_bounds"/,/]/c\  "stage_bounds": [0, 10]' "$tmpdir/p.json" >"$tmpdir/sp.json"
expect_ok "run --plan with sequence_parallel" mpin 4 --plan "$tmpdir/sp.json" --steps 3
check "the plan's losses are the one-rank run's" same_losses "$tmpdir/out" "$tmpdir/ref.json"

# checkpoints: saved with SP, continued without it (and the other way)
"$MERAK" run --gbs 8 --json --lr-decay-iters 4 --steps 4 >"$tmpdir/full.json" 2>"$tmpdir/e" || { cat "$tmpdir/e"; exit 1; }
tail2() { losses_of "$1" | tr ' ' '\n' | tail -n 2 | tr '\n' ' '; }
cont() { # cont DESC: $tmpdir/out continues $tmpdir/full.json
  printf '{"losses":[%s]}\n' "$(tail2 "$tmpdir/full.json" | sed 's/ $//; s/ /,/g')" >"$tmpdir/tail.json"
  check "$1 continues with the uninterrupted losses" same_losses "$tmpdir/out" "$tmpdir/tail.json"
}
expect_ok "save at step 2 with SP (dp=2 tp=2)" mpi 4 --dp 2 --tp 2 $SP --lr-decay-iters 4 --steps 2 --save "$tmpdir/c.st"
expect_ok "resume without SP (tp=2)" mpi 2 --tp 2 --lr-decay-iters 4 --steps 2 --load "$tmpdir/c.st"
cont "SP file without SP"
expect_ok "save at step 2 without SP (one rank)" "$MERAK" run --gbs 8 --json --lr-decay-iters 4 --steps 2 --save "$tmpdir/d.st"
expect_ok "resume with SP (pp=2 tp=2)" mpi 4 --pp 2 --tp 2 $SP --lr-decay-iters 4 --steps 2 --load "$tmpdir/d.st"
cont "one-rank file with SP"

expect_fail "SP with --tp-overlap" "sequence-parallel with --tp-overlap 1 is not supported" -- \
  mpi 2 --tp 2 $SP --tp-overlap 1 --steps 1
expect_fail "tp not dividing mbs*seq" "--tp 4 does not divide the 6 tokens" -- \
  mpi 4 --tp 4 $SP --seq-length 6 --steps 1

RUN_COMMON="$RUN_COMMON --model llama-tiny"
make_reference
equiv 2 2 2 $SP
equiv 1 2 2 $SP --schedule zb-h1 --recompute none --zero 1
finish
