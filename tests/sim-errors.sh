#!/bin/sh
# merak sim: bad input is one line on stderr and exit 2.
. "${top_srcdir:-.}/tests/lib.sh"
expect_fail "more GPUs than the cluster" "needs 2 GPUs" -- $MERAK sim --cluster h200 --dp 2
expect_fail "tp not dividing heads" "head|divid" -- $MERAK sim --tp 5
expect_fail "pp above blocks" "exceeds|blocks" -- $MERAK sim --model gpt-tiny --pp 8
expect_fail "unknown cluster" "unknown cluster" -- $MERAK sim --cluster nosuch
echo '{"name": "x",' >"$tmpdir/bad.json"
expect_fail "malformed cluster JSON" "malformed JSON" -- $MERAK sim --cluster "$tmpdir/bad.json"
sed 's/"gemm_eff": 0.75,/"gemm_eff": 3,/' "$top_srcdir/traces/clusters/rtx3090-pcie.json" >"$tmpdir/c1.json"
expect_fail "cluster field out of range" "gemm_eff" -- $MERAK sim --cluster "$tmpdir/c1.json"
sed 's/"nics_per_node": 1,//' "$top_srcdir/traces/clusters/rtx3090-pcie.json" >"$tmpdir/c2.json"
expect_fail "cluster field missing" "missing field 'nics_per_node'" -- $MERAK sim --cluster "$tmpdir/c2.json"
sed 's/"ideal": false,/"ideal": false, "bogus": 1,/' "$top_srcdir/traces/clusters/rtx3090-pcie.json" >"$tmpdir/c3.json"
expect_fail "cluster unknown field" "unknown field 'bogus'" -- $MERAK sim --cluster "$tmpdir/c3.json"
echo '{"model": ' >"$tmpdir/plan.json"
expect_fail "malformed plan JSON" "malformed JSON" -- $MERAK sim --plan "$tmpdir/plan.json"
echo '{"model": {"name": "x"}}' >"$tmpdir/plan2.json"
expect_fail "incomplete plan" "missing" -- $MERAK sim --plan "$tmpdir/plan2.json"
expect_fail "--plan with layout flags" "do not combine" -- $MERAK sim --plan "$tmpdir/plan2.json" --pp 2
expect_fail "gbs not divisible" "divisible" -- $MERAK sim --model gpt-tiny --gbs 7 --dp 2
expect_fail "bad schedule" "schedule" -- $MERAK sim --schedule nosuch
expect_fail "bad tp-overlap" "tp-overlap" -- $MERAK sim --model gpt-tiny --tp-overlap 4
expect_fail "tp-comm-overlap without SP" "--tp-comm-overlap needs --tp 2 or more and --sequence-parallel" -- \
  $MERAK sim --model gpt-tiny --tp 2 --tp-comm-overlap
expect_fail "tp-comm-overlap with tp-overlap" "no --tp-overlap" -- \
  $MERAK sim --model gpt-tiny --tp 2 --sequence-parallel --tp-overlap 1 --tp-comm-overlap
expect_fail "run refuses tp-comm-overlap" "tp-comm-overlap .* is for merak sim" -- \
  $MERAK run --model gpt-tiny --tp 2 --sequence-parallel --tp-comm-overlap --steps 1
expect_fail "unknown option" "unknown option" -- $MERAK sim --bogus
# context parallelism: the sequence (64) in 2 x cp equal chunks
expect_fail "cp not splitting the sequence" "--cp 3: the sequence \\(64\\) must split into 2 x cp = 6" -- $MERAK sim --model gpt-tiny --cp 3
expect_fail "cp chunks longer than the sequence" "--cp 64: the sequence" -- $MERAK sim --model gpt-tiny --cp 64 --cluster dgx-a100
expect_fail "cp above its maximum" "cp" -- $MERAK sim --model gpt-tiny --cp 2048
expect_fail "cp too many GPUs" "needs 4 GPUs" -- $MERAK sim --model gpt-tiny --cluster h200 --cp 2 --dp 2
finish
