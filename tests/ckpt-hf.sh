#!/bin/sh
# --load DIR (issue 36): a Hugging Face model directory as the hub
# publishes it (config.json, model.safetensors or shards with
# model.safetensors.index.json, in BF16, F16 or F32), written here with
# NumPy: BF16 and F16 weights load as their exact float32 values (the same
# losses as those values in an F32 file), sharded or not; the weights
# change the run (not a fresh init); a wrong directory is exit 2 naming it.
# --save-hf writes one back in the run's type (F32, or BF16/F16 rounded
# to nearest even with --bf16/--fp16).
. "$top_srcdir/tests/lib.sh"
"$PYTHON" -c "import numpy" 2>/dev/null || { echo "no numpy: skipped"; exit 77; }
cfgjson='{"model_type": "llama", "hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 64,
 "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": false, "hidden_act": "silu"}'
mkdir -p "$tmpdir/src" && printf '%s\n' "$cfgjson" >"$tmpdir/src/config.json"
"$MERAK" run --model "$tmpdir/src" --gbs 4 --steps 2 --seed 99 --save "$tmpdir/trained.st" >/dev/null 2>&1 ||
  { echo "FAIL: training the source weights"; exit 1; }
"$PYTHON" - "$top_srcdir/tests" "$tmpdir" <<'EOF'
import json, os, struct, sys
import numpy as np
sys.path.insert(0, sys.argv[1]); import st_read
d = sys.argv[2]
_, t = st_read.read(d + "/trained.st")
w = {k: np.array(v, dtype=np.float32).reshape(s) for k, (s, v) in t.items() if not k.startswith("optim.")}
def bf16(x):  # round to nearest even, as torch does
    u = x.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
def save(path, tensors):  # tensors: name -> (dtype string, numpy array of the stored type)
    hdr, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for k, (dt, a) in tensors.items():
        b = a.tobytes(); hdr[k] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b); off += len(b)
    h = json.dumps(hdr).encode()
    with open(path, "wb") as f: f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
def model_dir(name):
    p = "%s/%s" % (d, name); os.makedirs(p, exist_ok=True)
    open(p + "/config.json", "w").write(open(d + "/src/config.json").read()); return p
names = list(w)
# BF16, two shards and an index
p = model_dir("bf16"); half = len(names) // 2
shards = {"model-00001-of-00002.safetensors": names[:half], "model-00002-of-00002.safetensors": names[half:]}
for f, ks in shards.items(): save(p + "/" + f, {k: ("BF16", bf16(w[k])) for k in ks})
json.dump({"metadata": {}, "weight_map": {k: f for f, ks in shards.items() for k in ks}}, open(p + "/model.safetensors.index.json", "w"))
# the same values in F32, one file
p = model_dir("bf16-as-f32")
save(p + "/model.safetensors", {k: ("F32", (bf16(w[k]).astype(np.uint32) << 16).view(np.float32)) for k in names})
# F16, and its values in F32
p = model_dir("f16"); save(p + "/model.safetensors", {k: ("F16", w[k].astype(np.float16)) for k in names})
p = model_dir("f16-as-f32"); save(p + "/model.safetensors", {k: ("F32", w[k].astype(np.float16).astype(np.float32)) for k in names})
# refusals
p = model_dir("missing"); save(p + "/model.safetensors", {k: ("F32", w[k]) for k in names[1:]})
p = model_dir("escape"); save(p + "/model.safetensors", {k: ("F32", w[k]) for k in names})
json.dump({"weight_map": {k: "../model.safetensors" for k in names}}, open(p + "/model.safetensors.index.json", "w"))
p = model_dir("other"); c = json.load(open(p + "/config.json")); c["intermediate_size"] = 192
json.dump(c, open(p + "/config.json", "w")); save(p + "/model.safetensors", {k: ("F32", w[k]) for k in names})
EOF
run() { "$MERAK" run --model "$tmpdir/src" --gbs 4 --steps 2 --json "$@" 2>"$tmpdir/err"; }
losses() { "$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["losses"])' "$1"; }
for k in bf16 bf16-as-f32 f16 f16-as-f32; do run --load "$tmpdir/$k" >"$tmpdir/$k.json"; done
run >"$tmpdir/fresh.json"
check "BF16 shards load as their float32 values ($(losses "$tmpdir/bf16.json"))" \
  test "$(losses "$tmpdir/bf16.json")" = "$(losses "$tmpdir/bf16-as-f32.json")"
check "F16 loads as its float32 values" test "$(losses "$tmpdir/f16.json")" = "$(losses "$tmpdir/f16-as-f32.json")"
check "the loaded weights are used (not a fresh init: $(losses "$tmpdir/fresh.json"))" \
  test "$(losses "$tmpdir/bf16.json")" != "$(losses "$tmpdir/fresh.json")"
run --load "$tmpdir/bf16" >/dev/null
check "a Hugging Face directory starts at step 0, unverified (no checksums), said on stderr" grep -q "has no checksums" "$tmpdir/err"
# --save-hf: the trained weights as a Hugging Face directory, loadable again
"$MERAK" run --model "$tmpdir/src" --gbs 4 --steps 2 --seed 99 --save "$tmpdir/again.st" --save-hf "$tmpdir/hfout" \
  >/dev/null 2>"$tmpdir/err" || cat "$tmpdir/err"
check "--save-hf writes config.json and model.safetensors: the checkpoint's weights, bit for bit" "$PYTHON" -c '
import json, sys
sys.path.insert(0, sys.argv[1]); import st_read
_, a = st_read.read(sys.argv[2] + "/again.st")
meta, b = st_read.read(sys.argv[2] + "/hfout/model.safetensors")
assert meta["format"] == "pt" and sorted(b) == sorted(k for k in a if not k.startswith("optim."))
assert all(a[k] == b[k] for k in b)
assert json.load(open(sys.argv[2] + "/hfout/config.json"))["model_type"] == "llama"' "$top_srcdir/tests" "$tmpdir"
expect_ok "--load of a --save-hf directory (--model it too)" "$MERAK" run --model "$tmpdir/hfout" --load "$tmpdir/hfout" --gbs 4 --steps 1
check "its checksums are verified (no note)" sh -c "! grep -q 'has no checksums' '$tmpdir/err'"
expect_fail "--save-hf over a file" "exists and is not a directory" -- "$MERAK" run --steps 1 --save-hf "$tmpdir/again.st"
# sharded as save_pretrained shards (--hf-max-shard-size, max_shard_size): model-0000i-of-0000n.safetensors in
# order, a new one where the next tensor would pass the size, and model.safetensors.index.json; the same tensors
# as the one file of the same 2 steps; loadable; a directory of the other layout refused
"$MERAK" run --model "$tmpdir/src" --gbs 4 --steps 2 --seed 99 --save-hf "$tmpdir/hfshard" \
  --hf-max-shard-size 60KB >/dev/null 2>"$tmpdir/err" || cat "$tmpdir/err"
check "--hf-max-shard-size 60KB: shards of at most 60,000 bytes (a larger tensor alone), an index naming them" "$PYTHON" -c '
import json, os, sys
sys.path.insert(0, sys.argv[1]); import st_read
d = sys.argv[2] + "/hfshard"
idx = json.load(open(d + "/model.safetensors.index.json"))
files = sorted(set(idx["weight_map"].values()))
n = len(files)
assert n > 2 and files == ["model-%05d-of-%05d.safetensors" % (i + 1, n) for i in range(n)], files
_, one = st_read.read(sys.argv[2] + "/hfout/model.safetensors")
got, total = {}, 0
for f in files:
    meta, t = st_read.read(d + "/" + f)
    size = sum(4 * len(v) for _, v in t.values())
    assert size <= 60000 or len(t) == 1, (f, size)
    assert all(idx["weight_map"][k] == f for k in t) and meta["format"] == "pt"
    got.update(t); total += size
assert idx["metadata"]["total_size"] == total and sorted(got) == sorted(one) and all(got[k] == one[k] for k in one)
assert not os.path.exists(d + "/model.safetensors")' "$top_srcdir/tests" "$tmpdir"
# a 16-bit run exports in its type (issue 37): its fp32 master weights (the checkpoint of the same run)
# rounded to nearest even (NumPy's float16 cast; bf16() above), torch_dtype saying so, checksums of the
# stored bytes, sizes and shards by 2 bytes; each export loads as its values in an F32 file (written here)
for t in bf16 fp16; do
  "$MERAK" run --model "$tmpdir/src" --gbs 4 --steps 2 --seed 99 --$t --save "$tmpdir/m-$t.st" \
    --save-hf "$tmpdir/hf-$t" --hf-max-shard-size 30KB >/dev/null 2>"$tmpdir/err" || cat "$tmpdir/err"
done
check "--bf16/--fp16 --save-hf: BF16/F16 tensors, the run's fp32 masters rounded to nearest even" "$PYTHON" - \
  "$top_srcdir/tests" "$tmpdir" <<'PY'
import json, os, struct, sys, zlib
import numpy as np
sys.path.insert(0, sys.argv[1]); import st_read
d = sys.argv[2]
def bf16(x):
    u = x.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
rounded = {"BF16": lambda a: bf16(a), "F16": lambda a: a.astype(np.float16).view(np.uint16)}
for t, dt, torch in (("bf16", "BF16", "bfloat16"), ("fp16", "F16", "float16")):
    _, ref = st_read.read("%s/m-%s.st" % (d, t))
    ref = {k: v for k, v in ref.items() if not k.startswith("optim.")}
    widened, p = {}, "%s/hf-%s" % (d, t)
    assert json.load(open(p + "/config.json"))["torch_dtype"] == torch
    idx = json.load(open(p + "/model.safetensors.index.json"))
    seen, total = set(), 0
    for f in sorted(set(idx["weight_map"].values())):
        raw = open(p + "/" + f, "rb").read()
        n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n]); data = raw[8 + n:]
        meta = h.pop("__metadata__")
        size = 0
        for k, e in h.items():
            b, end = e["data_offsets"]
            want = rounded[dt](np.array(ref[k][1], dtype=np.float32))
            assert e["dtype"] == dt and end - b == 2 * want.size, (k, e)
            assert int(meta["crc32." + k], 16) == zlib.crc32(data[b:end]), k
            got = np.frombuffer(data[b:end], dtype="<u2")
            assert (got == want).all(), (t, k, int((got != want).sum()))
            wide = (got.astype(np.uint32) << 16).view(np.float32) if dt == "BF16" else got.view(np.float16).astype(np.float32)
            widened[k] = wide.reshape(e["shape"])
            seen.add(k); size += end - b
        assert size <= 30000 or len(h) == 1, (f, size)
        total += size
    assert seen == set(ref) and idx["metadata"]["total_size"] == total, (t, total)
    q = p + "-f32"; os.makedirs(q, exist_ok=True)  # the same values in F32, for the load check
    open(q + "/config.json", "w").write(open(p + "/config.json").read())
    hdr, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for k, a in widened.items():
        b = a.tobytes(); hdr[k] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b); off += len(b)
    h = json.dumps(hdr).encode()
    open(q + "/model.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
PY
for t in bf16 fp16; do
  run --load "$tmpdir/hf-$t" >"$tmpdir/l-$t.json"
  run --load "$tmpdir/hf-$t-f32" >"$tmpdir/l-$t-f32.json"
  check "the $t export loads as its values in an F32 file ($(losses "$tmpdir/l-$t.json"))" \
    test -n "$(losses "$tmpdir/l-$t.json")" -a "$(losses "$tmpdir/l-$t.json")" = "$(losses "$tmpdir/l-$t-f32.json")"
done
run --load "$tmpdir/hfshard" >"$tmpdir/s1.json"
run --load "$tmpdir/hfout" >"$tmpdir/s2.json"
check "the shards load as the one file does" test "$(losses "$tmpdir/s1.json")" = "$(losses "$tmpdir/s2.json")"
expect_fail "--save-hf of one file over shards" "holds model.safetensors.index.json, and this model saves model.safetensors" -- \
  "$MERAK" run --model "$tmpdir/src" --gbs 4 --steps 1 --save-hf "$tmpdir/hfshard"
expect_fail "a size that is none" "hf-max-shard-size '5XB' is not a size" -- "$MERAK" run --steps 1 --hf-max-shard-size 5XB
expect_fail "a missing tensor" "tensor 'model.embed_tokens.weight' is missing" -- "$MERAK" run --model "$tmpdir/src" --gbs 4 --steps 1 --load "$tmpdir/missing"
expect_fail "a shard outside the directory" "must be a file name in the directory" -- "$MERAK" run --model "$tmpdir/src" --gbs 4 --steps 1 --load "$tmpdir/escape"
expect_fail "another model" "model mismatch: its config.json and this run's model differ in intermediate_size" -- \
  "$MERAK" run --model "$tmpdir/src" --gbs 4 --steps 1 --load "$tmpdir/other"
finish
