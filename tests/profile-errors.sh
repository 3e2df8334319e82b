#!/bin/sh
# Malformed cluster profiles are rejected by `merak sim/plan --cluster` with
# one line and exit 2; bad `merak profile` arguments likewise (one rank).
. "$top_srcdir/tests/lib.sh"
good='{"name": "p", "gpus_per_node": 2, "max_nodes": 1, "nics_per_node": 1, "ideal": false,
 "intra": {"alpha_s": 1e-6, "beta_Bps": 5e9}, "inter": {"alpha_s": 1e-6, "beta_Bps": 5e9},
 "device": {"name": "cpu", "matmul_flops": {"fp32": 5e10, "fp16": 5e10, "bf16": 5e10},
  "vector_flops": 1e9, "mem_bw_Bps": 6e9, "mem_bytes": 4e9, "launch_s": 2e-7,
  "gemm_eff": 0.8, "gemm_half_dim": 30, "has_bf16": false}}'
echo "$good" >"$tmpdir/good.json"
SIM="--model gpt-tiny --dtype fp32 --dp 1 --pp 2 --tp 1 --gbs 8"
expect_ok "a well-formed profile runs" "$MERAK" sim --cluster "$tmpdir/good.json" $SIM
bad() { # bad NAME PATTERN PYTHON-EXPR-ON-j
  echo "$good" | "$PYTHON" -c "import json,sys; j=json.load(sys.stdin); $3; print(json.dumps(j))" >"$tmpdir/$1.json"
  expect_fail "profile $1" "$2" -- "$MERAK" sim --cluster "$tmpdir/$1.json" $SIM
}
bad missing-field "missing field 'launch_s'" "del j['device']['launch_s']"
bad unknown-field "unknown field 'gemm_fit'" "j['device']['gemm_fit'] = 1"
bad gemm-eff-above-1 "gemm_eff must be in" "j['device']['gemm_eff'] = 1.5"
bad negative-bandwidth "beta_Bps" "j['intra']['beta_Bps'] = -1"
bad string-number "must be a number" "j['device']['mem_bw_Bps'] = 'fast'"
bad zero-gpus "gpus_per_node" "j['gpus_per_node'] = 0"
bad not-an-object "must be a JSON object" "j = [1, 2]"
bad negative-vector-bwd "vector_bwd_flops" "j['device']['vector_bwd_flops'] = -1"
# vector_bwd_flops (issue 15): the backward's vector rate; equal to
# vector_flops it changes nothing, slower it slows the step
step() { "$MERAK" sim --cluster "$1" $SIM --json | "$PYTHON" -c "import json,sys; print(json.load(sys.stdin)['step_time_s'])"; }
with_vb() { echo "$good" | "$PYTHON" -c "import json,sys; j=json.load(sys.stdin); j['device']['vector_bwd_flops'] = $1; print(json.dumps(j))" >"$tmpdir/vb.json"; }
t0=$(step "$tmpdir/good.json"); with_vb 1e9; t1=$(step "$tmpdir/vb.json"); with_vb 1e7; t2=$(step "$tmpdir/vb.json")
check "vector_bwd_flops = vector_flops: the same step ($t0 s)" test "$t0" = "$t1"
check "vector_bwd_flops 100x lower: a slower step ($t2 > $t0 s)" "$PYTHON" -c "assert $t2 > $t0 * 1.01"
printf '{"name": "p", "gpus_per_node": 2,' >"$tmpdir/truncated.json"
expect_fail "profile truncated" "malformed JSON" -- "$MERAK" sim --cluster "$tmpdir/truncated.json" $SIM
expect_fail "profile missing" "cannot read cluster file" -- "$MERAK" sim --cluster "$tmpdir/nope.json" $SIM
expect_fail "plan with a malformed profile" "gemm_eff must be in" -- \
  "$MERAK" plan --cluster "$tmpdir/gemm-eff-above-1.json" --model gpt-tiny --gpus 2 --gbs 8
expect_fail "profile: unknown option" "unknown option" -- "$MERAK" profile --bogus
expect_fail "profile: unwritable output" "cannot write" -- "$MERAK" profile --out /nonexistent/dir/p.json
expect_fail "profile: stray argument" "unexpected argument" -- "$MERAK" profile extra
expect_ok "profile --help" "$MERAK" profile --help
finish
