#!/bin/sh
# Llama checkpoints (Hugging Face LlamaForCausalLM names, shapes and
# config), with the GPT's layout guarantee (tests/mpi-ckpt.sh):
#  - the same model state is the same file: the initial model saved on one
#    rank and at dp=2 pp=2 tp=2 is byte-identical, and a file loaded at any
#    layout and saved again at once (--steps 0) is bit-exact;
#  - after training steps, layouts differ only by float rounding (the order
#    of the DP / TP sums): the 1-rank and 2/2/2 files agree within 1e-5 per
#    element, the same layout rerun writes the same bytes;
#  - any layout loads any file: same-layout resume is bitwise the
#    uninterrupted run, other layouts continue within 1e-5.
# Tied (no lm_head in the file; the head's wte copy at pp > 1) and untied
# at pp > 1 (the head owns lm_head; a vocabulary past MPI's eager limit
# once hung the load), ZeRO-1.  A Llama file is refused by a GPT run.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/mpi-exec-lib.sh"
PY=${PYTHON:-python3}
ST="$top_srcdir/tests/st_read.py"
M="--model llama-tiny --gbs 8 --lr-decay-iters 4 --json"
TIED="--model gpt-tiny --normalization RMSNorm --swiglu --position-embedding-type rope --disable-bias-linear
  --group-query-attention --num-query-groups 2 --ffn-hidden-size 192 --gbs 8 --lr-decay-iters 4 --json"
one() { timeout 60 "$MERAK" run "$@"; }
mpi() { n=$1; shift; timeout 60 "$MPIEXEC" $MPIEXEC_FLAGS -n "$n" "$MERAK" run "$@"; }
lastn() { losses_of "$1" | tr ' ' '\n' | tail -n "$2" | tr '\n' ' '; }
rm_first() { sed "s/\"losses\":\[[^,]*,[^,]*,/\"losses\":[/" "$1"; }
# agree A B TOL: same names, shapes and metadata; every element within TOL
agree() {
  "$PY" -c '
import sys; sys.path.insert(0, sys.argv[1]); import st_read
ma, a = st_read.read(sys.argv[2]); mb, b = st_read.read(sys.argv[3])
assert a.keys() == b.keys() and ma["config"] == mb["config"] and ma["step"] == mb["step"]
for k in a:
    assert a[k][0] == b[k][0], k
    assert max(abs(x - y) for x, y in zip(a[k][1], b[k][1])) <= float(sys.argv[4]), k' \
    "$top_srcdir/tests" "$1" "$2" "$3"
}
# through FILE NAME RANKS FLAGS...: load FILE at a layout, save at once; bit-exact
through() {
  f=$1; name=$2; shift 2
  expect_ok "$name: load and save at once" mpi "$@" --steps 0 --load "$tmpdir/$f" --save "$tmpdir/thr.st"
  check "$name: bit-exact" cmp -s "$tmpdir/$f" "$tmpdir/thr.st"
}

# the same state is the same file
expect_ok "initial model, one rank" one $M --steps 0 --save "$tmpdir/i1.st"
expect_ok "initial model, dp=2 pp=2 tp=2" mpi 8 $M --dp 2 --pp 2 --tp 2 --steps 0 --save "$tmpdir/i8.st"
check "initial model: one rank and 2/2/2 write the same bytes" cmp -s "$tmpdir/i1.st" "$tmpdir/i8.st"

# names, shapes and config (llama-tiny: 4 blocks, C 64, 4 heads of 16, 2 KV heads, F 192, V 256)
one $M --steps 4 >"$tmpdir/full1.json" 2>"$tmpdir/e" || { cat "$tmpdir/e"; exit 1; }
expect_ok "save at step 2, one rank" one $M --steps 2 --save "$tmpdir/c1.st"
"$PY" "$ST" "$tmpdir/c1.st" --check=model.embed_tokens.weight=256x64 --check=lm_head.weight=256x64 \
  --check=model.layers.0.input_layernorm.weight=64 --check=model.layers.3.self_attn.q_proj.weight=64x64 \
  --check=model.layers.1.self_attn.k_proj.weight=32x64 --check=model.layers.2.self_attn.v_proj.weight=32x64 \
  --check=model.layers.0.self_attn.o_proj.weight=64x64 --check=model.layers.3.post_attention_layernorm.weight=64 \
  --check=model.layers.1.mlp.gate_proj.weight=192x64 --check=model.layers.2.mlp.up_proj.weight=192x64 \
  --check=model.layers.3.mlp.down_proj.weight=64x192 --check=model.norm.weight=64 \
  --check=optim.m.lm_head.weight=256x64 --check=optim.v.model.layers.0.mlp.down_proj.weight=64x192 \
  >"$tmpdir/names" 2>&1
check "Hugging Face Llama names and shapes" test $? -eq 0
check "117 tensors (39 weights, m, v)" test "$(grep -c ' F32 ' "$tmpdir/names")" -eq 117
check "config: LlamaConfig's fields" "$PY" -c '
import sys, json; sys.path.insert(0, sys.argv[1]); import st_read
c = json.loads(st_read.read(sys.argv[2])[0]["config"])
assert c == {"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4,
             "num_key_value_heads": 2, "intermediate_size": 192, "vocab_size": 256, "max_position_embeddings": 64,
             "rms_norm_eps": 1e-5, "rope_theta": 10000, "tie_word_embeddings": False}, c' "$top_srcdir/tests" "$tmpdir/c1.st"

# after steps: rounding only between layouts; determinism at one layout
mpi 8 $M --dp 2 --pp 2 --tp 2 --steps 4 >"$tmpdir/full8.json" 2>"$tmpdir/e" || { cat "$tmpdir/e"; exit 1; }
expect_ok "save at step 2, dp=2 pp=2 tp=2" mpi 8 $M --dp 2 --pp 2 --tp 2 --steps 2 --save "$tmpdir/c8.st"
check "step 2: one-rank and 2/2/2 files agree (1e-5)" agree "$tmpdir/c1.st" "$tmpdir/c8.st" 1e-5
expect_ok "save at step 2, dp=2 pp=2 tp=2 again" mpi 8 $M --dp 2 --pp 2 --tp 2 --steps 2 --save "$tmpdir/c8b.st"
check "step 2: the same layout writes the same bytes" cmp -s "$tmpdir/c8.st" "$tmpdir/c8b.st"

# any layout loads it
expect_ok "resume the 2/2/2 file at 2/2/2" mpi 8 $M --dp 2 --pp 2 --tp 2 --steps 2 --load "$tmpdir/c8.st"
check "same layout: bitwise the uninterrupted losses" test "$(lastn "$tmpdir/full8.json" 2)" = "$(lastn "$tmpdir/out" 2)"
expect_ok "resume the one-rank file on one rank" one $M --steps 2 --load "$tmpdir/c1.st"
check "one rank: bitwise the uninterrupted losses (Adam moments restored)" \
  test "$(lastn "$tmpdir/full1.json" 2)" = "$(lastn "$tmpdir/out" 2)"
rm_first "$tmpdir/full1.json" >"$tmpdir/tail.json"
expect_ok "resume the 2/2/2 file at dp=1 pp=4 tp=2" mpi 8 $M --pp 4 --tp 2 --steps 2 --load "$tmpdir/c8.st"
check "dp=1 pp=4 tp=2 continues with the one-rank losses (1e-5)" same_losses "$tmpdir/out" "$tmpdir/tail.json"
expect_ok "resume the one-rank file at dp=2 pp=2 tp=2" mpi 8 $M --dp 2 --pp 2 --tp 2 --steps 2 --load "$tmpdir/c1.st"
check "2/2/2 continues with the one-rank losses (1e-5)" same_losses "$tmpdir/out" "$tmpdir/tail.json"
through c8.st "untied, 2/2/2 file through dp=1 pp=4 tp=2" 8 $M --pp 4 --tp 2
through c1.st "untied, one-rank file through ZeRO-1 dp=2 tp=2" 4 $M --dp 2 --tp 2 --zero 1

# untied at pp 2 with a vocabulary of 50257 (12.9 MB tensors)
B="--model llama-tiny --num-layers 2 --vocab-size 50257 --gbs 4 --json"
expect_ok "V=50257: initial model, one rank" one $B --steps 0 --save "$tmpdir/big.st"
through big.st "V=50257 untied through pp 2" 2 $B --pp 2

# tied: no lm_head in the file; at pp > 1 the head's copy of wte
expect_ok "tied: save at step 2, one rank" one $TIED --steps 2 --save "$tmpdir/t1.st"
check "tied: config says so, no lm_head.weight, 114 tensors" "$PY" -c '
import sys, json; sys.path.insert(0, sys.argv[1]); import st_read
m, t = st_read.read(sys.argv[2]); c = json.loads(m["config"])
assert c["model_type"] == "llama" and c["tie_word_embeddings"] is True and len(t) == 114
assert not any("lm_head" in k for k in t)' "$top_srcdir/tests" "$tmpdir/t1.st"
one $TIED --steps 4 >"$tmpdir/tfull.json" 2>"$tmpdir/e" || { cat "$tmpdir/e"; exit 1; }
rm_first "$tmpdir/tfull.json" >"$tmpdir/ttail.json"
expect_ok "tied: resume at dp=2 pp=2 tp=2" mpi 8 $TIED --dp 2 --pp 2 --tp 2 --steps 2 --load "$tmpdir/t1.st"
check "tied: 2/2/2 continues with the one-rank losses (1e-5)" same_losses "$tmpdir/out" "$tmpdir/ttail.json"
through t1.st "tied, one-rank file through pp 4" 4 $TIED --pp 4

expect_fail "a Llama file refused by a GPT run" "model mismatch: the checkpoint holds .*llama" -- \
  one --gbs 8 --steps 1 --load "$tmpdir/c1.st"
finish
