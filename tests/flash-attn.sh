#!/bin/sh
# --use-flash-attn (issue 15): a plan property written only when on, read
# back by `merak sim --plan`; on a real cluster it changes the attention
# core's time and drops its s x s scores from memory, on `ideal` nothing;
# `merak run` accepts it with the same results (exact attention either way).
. "${top_srcdir:-.}/tests/lib.sh"
PY=${PYTHON:-python3}
get() { "$PY" -c "import json, sys; j = json.load(open(sys.argv[1])); print(repr(eval(sys.argv[2])))" "$1" "$2"; }
M="--model gpt-tiny --seq-length 512 --gbs 8 --mbs 2 --recompute none --json"

expect_ok "sim, materialised core" $MERAK sim $M --cluster dgx-a100
cp "$tmpdir/out" "$tmpdir/mat.json"
check "default plan: no use_flash_attn key" [ "$(get "$tmpdir/mat.json" "j['plan'].get('use_flash_attn', '-')")" = "'-'" ]
expect_ok "sim --use-flash-attn" $MERAK sim $M --cluster dgx-a100 --use-flash-attn
cp "$tmpdir/out" "$tmpdir/fl.json"
check "... writes use_flash_attn true" [ "$(get "$tmpdir/fl.json" "j['plan']['use_flash_attn']")" = "True" ]
check "... a shorter step (no score passes) and less memory (no scores kept)" "$PY" -c "import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert b['step_time_s'] < a['step_time_s'], (a['step_time_s'], b['step_time_s'])
assert max(b['peak_memory_bytes']) < max(a['peak_memory_bytes']), (a['peak_memory_bytes'], b['peak_memory_bytes'])" \
  "$tmpdir/mat.json" "$tmpdir/fl.json"

# the plan file runs to the same step time; false means the default
"$PY" -c "import json, sys; json.dump(json.load(open(sys.argv[1]))['plan'], open(sys.argv[2], 'w'))" "$tmpdir/fl.json" "$tmpdir/p.json"
expect_ok "sim --plan with use_flash_attn" $MERAK sim --plan "$tmpdir/p.json" --json
check "... same step time" [ "$(get "$tmpdir/out" "j['step_time_s']")" = "$(get "$tmpdir/fl.json" "j['step_time_s']")" ]
"$PY" -c "import json, sys; p = json.load(open(sys.argv[1])); p['use_flash_attn'] = False; json.dump(p, open(sys.argv[2], 'w'))" "$tmpdir/p.json" "$tmpdir/off.json"
expect_ok "sim --plan with use_flash_attn false" $MERAK sim --plan "$tmpdir/off.json" --json
check "... the materialised core's step time" [ "$(get "$tmpdir/out" "j['step_time_s']")" = "$(get "$tmpdir/mat.json" "j['step_time_s']")" ]
"$PY" -c "import json, sys; p = json.load(open(sys.argv[1])); p['use_flash_attn'] = 1; json.dump(p, open(sys.argv[2], 'w'))" "$tmpdir/p.json" "$tmpdir/bad.json"
expect_fail "use_flash_attn not a boolean" "'use_flash_attn' must be true or false" -- $MERAK sim --plan "$tmpdir/bad.json"
expect_fail "--use-flash-attn with --plan" "do not combine it with model or layout flags" -- \
  $MERAK sim --plan "$tmpdir/p.json" --use-flash-attn

# ideal: only matmuls cost, the same either way
expect_ok "ideal" $MERAK sim $M --cluster ideal
cp "$tmpdir/out" "$tmpdir/i1.json"
expect_ok "ideal --use-flash-attn" $MERAK sim $M --cluster ideal --use-flash-attn
check "ideal cluster: the same step time" [ "$(get "$tmpdir/out" "j['step_time_s']")" = "$(get "$tmpdir/i1.json" "j['step_time_s']")" ]

# the executor: same losses with the flag
R="--model gpt-tiny --steps 2 --json"
expect_ok "run" $MERAK run $R
cp "$tmpdir/out" "$tmpdir/r1.json"
expect_ok "run --use-flash-attn" $MERAK run $R --use-flash-attn
check "... the same losses" [ "$(get "$tmpdir/out" "j['losses']")" = "$(get "$tmpdir/r1.json" "j['losses']")" ]
finish
