#!/bin/sh
# Messages name where a value came from: a bad model inside a plan file
# names the file and the field (not the command-line flags); merak trace
# counts ranks as the distinct pids of a trace.
. "$top_srcdir/tests/lib.sh"
PY=${PYTHON:-python3}
"$MERAK" sim --model gpt-tiny --cluster ideal --json >"$tmpdir/s.json"
# edit FILE PYTHON: the plan of s.json, changed by PYTHON (p: the plan)
edit() { "$PY" -c 'import json,sys
p = json.load(open(sys.argv[1]))["plan"]
exec(sys.argv[3])
json.dump(p, open(sys.argv[2], "w"))' "$tmpdir/s.json" "$tmpdir/$1" "$2"; }
edit plan.json 'p["model"]["hidden_size"] = 65; p["model"]["num_attention_heads"] = 4'
expect_fail "plan file: hidden size not divisible by the heads" \
  "^merak sim: .*plan.json: model.num_attention_heads 4 does not divide model.hidden_size 65$" -- \
  "$MERAK" sim --plan "$tmpdir/plan.json"
expect_fail "run --plan: the same message" "plan.json: model.num_attention_heads 4 does not divide model.hidden_size 65$" -- \
  "$MERAK" run --plan "$tmpdir/plan.json" --steps 0
expect_fail "the same values as flags name the flags" \
  "^merak sim: --num-attention-heads 4 does not divide --hidden-size 65$" -- \
  "$MERAK" sim --model gpt-tiny --hidden-size 65 --num-attention-heads 4
edit big.json 'p["model"]["num_layers"] = 5000'
expect_fail "plan file: a size above its maximum" "big.json: model.num_layers must be at most 1024, got 5000$" -- \
  "$MERAK" sim --plan "$tmpdir/big.json"
edit gqa.json 'p["model"]["num_query_groups"] = 3'
expect_fail "plan file: query groups" "gqa.json: model.num_query_groups 3 does not divide model.num_attention_heads 4$" -- \
  "$MERAK" sim --plan "$tmpdir/gqa.json"

# trace ranks: a simulator trace holds one rank per stage (pids 0, 16, 32, 48)
"$MERAK" sim --model gpt-tiny --cluster ideal --dp 4 --tp 4 --pp 4 --gbs 64 --trace "$tmpdir/p.json" >/dev/null
"$MERAK" sim --model gpt-tiny --cluster ideal --pp 2 --gbs 8 --trace "$tmpdir/m.json" >/dev/null
"$MERAK" trace summary "$tmpdir/p.json" >"$tmpdir/sum.txt"
check "summary: 4 ranks (pids 0, 16, 32, 48), not 49" grep -q '^trace: 4 ranks,' "$tmpdir/sum.txt"
expect_fail "diff of different plans: the ranks each trace holds" \
  "the predicted trace has 4 ranks \(up to rank 48\), the measured one 2 \(up to rank 1\): different plans\?$" -- \
  "$MERAK" trace diff "$tmpdir/p.json" "$tmpdir/m.json"
finish
