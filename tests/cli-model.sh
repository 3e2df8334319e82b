#!/bin/sh
# merak models / model: the listing, the JSON contract, flag overrides in
# any order, and speed on the largest preset.
. "$top_srcdir/tests/lib.sh"
PY=${PYTHON:-python3}

expect_ok "merak --help" "$MERAK" --help
expect_ok "merak --version" "$MERAK" --version
expect_ok "merak model --help" "$MERAK" model --help
check "model --help names --tp" grep -q -- "--tp" "$tmpdir/out"
expect_ok "merak models" "$MERAK" models
for m in gpt-tiny gpt2-124m gpt-1.5b gpt-2.5b gpt-8.3b gpt-20b gpt-175b bert-large \
         dgx-a100 dgx-h100 rtx3090-pcie h200 ideal; do
  check "models lists $m" grep -q -- "$m" "$tmpdir/out"
done

# --json: stdout holds exactly one JSON object with the contract keys
"$MERAK" model --model gpt-1.5b --json >"$tmpdir/m.json" 2>"$tmpdir/err"
check "model --json exits 0" [ $? -eq 0 ]
check "model --json has the contract keys" "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["params"] == 1557611200, d["params"]
assert d["flops_per_iteration"] > 0
L = d["layers"]
assert L[0]["kind"] == "embedding" and L[-1]["kind"] == "head"
for l in L:
    for k in ("name", "kind", "params", "fwd_flops", "bwd_flops", "act_bytes"):
        assert k in l, k
assert abs(sum(l["params"] for l in L) - d["params"]) < 1
' "$tmpdir/m.json"

# model flags override the preset whatever their order
a=$("$MERAK" model --num-layers 2 --model gpt-8.3b --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["num_layers"])')
b=$("$MERAK" model --model gpt-8.3b --num-layers 2 --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["num_layers"])')
check "flags override the preset before and after --model ($a, $b)" [ "$a" = 2 ] && [ "$b" = 2 ]
f=$("$MERAK" model --model gpt-tiny --hidden-size 128 --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["ffn_hidden_size"])')
check "ffn re-derived as 4h when --hidden-size changes ($f)" [ "$f" = 512 ]
f=$("$MERAK" model --ffn-hidden-size 100 --model gpt-tiny --hidden-size 128 --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["ffn_hidden_size"])')
check "explicit --ffn-hidden-size wins ($f)" [ "$f" = 100 ]
v=$("$MERAK" model --model gpt-8.3b --tensor-model-parallel-size 8 --json | "$PY" -c 'import json,sys; d=json.load(sys.stdin); print(d["vocab_padded"], d["vocab_size"], d["tp"])')
check "Megatron long flag and vocab padding at tp 8 ($v)" [ "$v" = "51200 50257 8" ]

# JSON model descriptions shipped as examples
for f in gpt-small bert-small stack; do
  expect_ok "model from traces/models/$f.json" "$MERAK" model --model "$top_srcdir/traces/models/$f.json"
done

# the largest preset answers well under a second
start=$(date +%s%N)
"$MERAK" model --model gpt-175b --json >/dev/null
ms=$(( ($(date +%s%N) - start) / 1000000 ))
check "gpt-175b --json in ${ms} ms (< 1000)" [ "$ms" -lt 1000 ]
finish
