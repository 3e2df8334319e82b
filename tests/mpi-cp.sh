#!/bin/sh
# Context parallelism in the executor (--cp): each sequence in 2cp chunks,
# CP rank i holding chunks i and 2cp-1-i, attention as a K/V ring.  The
# one-rank losses (3 steps, 1e-5) and step-1 gradients (per tensor, 1e-5)
# at dp 2 x cp 2, cp 4 on one replica, pp 2 x cp 2 (zb-h1: the split
# backward), tp 2 x cp 2 (TP overlap 2), ZeRO-3 with full recompute
# (ZeRO-1: the losses); gpt-tiny (learned positions) and llama-tiny (RoPE,
# GQA).  A rank's peak memory at dp 2 x cp 2 is below dp 2's.  The traced
# step names the ring's SEND_KV and RECV_KV.  A checkpoint saved at cp 2 is
# one unsharded file that resumes on one rank (and one rank's resumes at
# cp 2) with the uninterrupted losses.  --cp-comm-type allgather (the K/V
# all-gathered, dK/dV reduce-scattered) is one rank's too, its forward the
# ring's bit for bit (the same blocks in the same order: step 1's loss),
# traced AG.cp and RS.cp; a2a (Ulysses: the heads split over the CP ranks,
# every row of the sequence on each, the fused attention on them) is one
# rank's too (gpt-tiny, llama-tiny's GQA), traced A2A.cp.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/mpi-exec-lib.sh"
EQUIV_TIMEOUT=60
make_reference
EQUIV_CP=2 equiv 2 1 1
EQUIV_CP=4 equiv 1 1 1
EQUIV_CP=2 equiv 1 2 1 --schedule zb-h1
EQUIV_CP=2 equiv 1 1 2 --tp-overlap 2 --mbs 2
EQUIV_CP=2 equiv 2 1 1 --zero 3 --recompute full
EQUIV_CP=4 equiv 1 1 1 --cp-comm-type allgather
EQUIV_CP=2 equiv 1 2 1 --schedule zb-h1 --cp-comm-type allgather
EQUIV_CP=2 equiv 1 1 2 --tp-overlap 2 --mbs 2 --cp-comm-type allgather
EQUIV_CP=4 equiv 1 1 1 --cp-comm-type a2a
EQUIV_CP=2 equiv 1 2 1 --schedule zb-h1 --cp-comm-type a2a
EQUIV_CP=2 equiv 1 1 2 --tp-overlap 2 --mbs 2 --cp-comm-type a2a
run4c() { timeout 60 "$MPIEXEC" $MPIEXEC_FLAGS -n 4 "$MERAK" run --gbs 8 --json --cp 4 --steps 2 "$@" 2>/dev/null </dev/null; }
first_loss() { sed -n 's/.*"losses":\[\([^,]*\),.*/\1/p' "$1"; }
run4c >"$tmpdir/ring.json"; run4c --cp-comm-type allgather --trace "$tmpdir/ag.trace" >"$tmpdir/ag.json"
check "allgather's first loss is the ring's, bit for bit ($(first_loss "$tmpdir/ag.json"))" \
  test -n "$(first_loss "$tmpdir/ring.json")" -a "$(first_loss "$tmpdir/ring.json")" = "$(first_loss "$tmpdir/ag.json")"
check "allgather traced: AG.cp and RS.cp, no ring" test "$(grep -c '"AG.cp"' "$tmpdir/ag.trace")" -gt 0 -a \
  "$(grep -c '"RS.cp"' "$tmpdir/ag.trace")" -gt 0 -a "$(grep -c '"SEND_KV"' "$tmpdir/ag.trace")" -eq 0
run4c --cp-comm-type a2a --trace "$tmpdir/a2a.trace" >"$tmpdir/a2a.json"
"$MERAK" run --gbs 8 --json --steps 2 >"$tmpdir/one2.json" 2>/dev/null </dev/null
check "a2a at cp 4: one rank's losses (1e-5)" same_losses "$tmpdir/a2a.json" "$tmpdir/one2.json"
check "a2a traced: A2A.cp, no ring" test "$(grep -c '"A2A.cp"' "$tmpdir/a2a.trace")" -gt 0 -a \
  "$(grep -c '"SEND_KV"' "$tmpdir/a2a.trace")" -eq 0
expect_fail "a2a over more CP ranks than K/V heads (llama-tiny: 2)" "a2a splits each TP rank's heads over cp 4" -- \
  "$MPIEXEC" $MPIEXEC_FLAGS -n 4 "$MERAK" run --model llama-tiny --cp 4 --cp-comm-type a2a --steps 1
run4() { timeout 60 "$MPIEXEC" $MPIEXEC_FLAGS -n 4 "$MERAK" run --gbs 8 --json "$@"; }
# ZeRO-1 dumps no gradients: its losses
expect_ok "dp 2 cp 2 --zero 1 runs" run4 --dp 2 --cp 2 --zero 1 --steps 3
check "dp 2 cp 2 --zero 1: the one-rank losses (1e-5)" same_losses "$tmpdir/out" "$tmpdir/ref.json"
RUN_COMMON="$RUN_COMMON --model llama-tiny"
make_reference
EQUIV_CP=2 equiv 2 1 1
EQUIV_CP=2 equiv 1 2 1 --recompute full
EQUIV_CP=2 equiv 1 1 2
EQUIV_CP=2 equiv 2 1 1 --cp-comm-type a2a
EQUIV_CP=2 equiv 1 1 1 --cp-comm-type allgather

expect_ok "traced cp 2 run" run4 --dp 2 --cp 2 --steps 2 --trace "$tmpdir/t.json"
check "trace: SEND_KV and RECV_KV events" test "$(grep -c '"SEND_KV"' "$tmpdir/t.json")" -gt 0 -a \
  "$(grep -c '"RECV_KV"' "$tmpdir/t.json")" -gt 0

# activations divided by cp: a rank's peak below dp 2's alone
peak_of() { sed -n 's/.*"peak_memory_bytes":\[\([0-9]*\).*/\1/p' "$1"; }
timeout 60 "$MPIEXEC" $MPIEXEC_FLAGS -n 2 "$MERAK" run --gbs 8 --json --dp 2 --steps 1 >"$tmpdir/dp2.json" 2>&1
expect_ok "dp 2 cp 2, one step" run4 --dp 2 --cp 2 --steps 1
check "peak memory: dp 2 cp 2 ($(peak_of "$tmpdir/out")) < dp 2 ($(peak_of "$tmpdir/dp2.json"))" \
  test -n "$(peak_of "$tmpdir/dp2.json")" -a "$(peak_of "$tmpdir/out")" -lt "$(peak_of "$tmpdir/dp2.json")"

# checkpoints across cp: the uninterrupted 4 steps, saved at 2, resumed
rm_first() { sed "s/\"losses\":\[[^,]*,[^,]*,/\"losses\":[/" "$1"; }
"$MERAK" run --gbs 8 --json --lr-decay-iters 4 --steps 4 >"$tmpdir/full.json" 2>"$tmpdir/e" || { cat "$tmpdir/e"; exit 1; }
rm_first "$tmpdir/full.json" >"$tmpdir/tail.json"
expect_ok "save at step 2 (dp 2 cp 2)" run4 --dp 2 --cp 2 --lr-decay-iters 4 --steps 2 --save "$tmpdir/c.st"
expect_ok "resume on one rank" "$MERAK" run --gbs 8 --json --steps 2 --load "$tmpdir/c.st"
check "one rank continues with the uninterrupted losses (1e-5)" same_losses "$tmpdir/out" "$tmpdir/tail.json"
"$MERAK" run --gbs 8 --lr-decay-iters 4 --steps 2 --save "$tmpdir/one.st" 2>/dev/null
expect_ok "resume a one-rank checkpoint at cp 2 (pp 2)" run4 --pp 2 --cp 2 --steps 2 --load "$tmpdir/one.st"
check "cp 2 continues with the uninterrupted losses (1e-5)" same_losses "$tmpdir/out" "$tmpdir/tail.json"
finish
