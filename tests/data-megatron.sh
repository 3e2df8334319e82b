#!/bin/sh
# Megatron-LM indexed datasets (issue 36): --data-path PREFIX (PREFIX.bin +
# PREFIX.idx, written here with NumPy as megatron/core/datasets/
# indexed_dataset.py writes them) trains on the same tokens as the same
# stream in a raw uint16 file; int32 ids above 65535 load for a 128,256
# vocabulary; a bad index is exit 2 naming what is wrong, before training.
. "$top_srcdir/tests/lib.sh"
"$PYTHON" -c "import numpy" 2>/dev/null || { echo "no numpy: skipped"; exit 77; }
"$PYTHON" - "$tmpdir" <<'EOF'
import numpy as np, struct, sys
d = sys.argv[1]
def write(prefix, docs, dtype, code, modes=False):
    with open(prefix + ".bin", "wb") as f:
        for x in docs: f.write(np.asarray(x, dtype=dtype).tobytes())
    lens = np.array([len(x) for x in docs], dtype=np.int32)
    ptr = np.concatenate([[0], np.cumsum(lens[:-1].astype(np.int64) * np.dtype(dtype).itemsize)]).astype(np.int64)
    doc = np.arange(len(docs) + 1, dtype=np.int64)
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", code))
        f.write(struct.pack("<Q", len(docs)) + struct.pack("<Q", len(doc)))
        f.write(lens.tobytes() + ptr.tobytes() + doc.tobytes())
        if modes: f.write(np.zeros(len(docs), dtype=np.int8).tobytes())
rng = np.random.default_rng(7)
docs = [rng.integers(0, 256, int(n)) for n in rng.integers(50, 400, 40)]
write(d + "/u16", docs, np.uint16, 8)
write(d + "/i32", docs, np.int32, 4, modes=True)
np.concatenate(docs).astype("<u2").tofile(d + "/raw.u16")
big = [rng.integers(0, 128256, 300) for _ in range(10)]
big[0][0] = 128255
write(d + "/big", big, np.int32, 4)
# refusals: each a copy of u16 with one thing wrong
idx = open(d + "/u16.idx", "rb").read()
bad = {"magic": b"MMIDIDY" + idx[7:], "version": idx[:9] + struct.pack("<Q", 2) + idx[17:],
       "float": idx[:17] + b"\x07" + idx[18:], "short": idx[:-8],
       "pointer": idx[:34 + 4 * 40] + struct.pack("<q", 10**9) + idx[34 + 4 * 40 + 8:],
       "documents": idx[:-16] + struct.pack("<q", 41) + idx[-8:]}
for k, v in bad.items():
    open("%s/bad-%s.idx" % (d, k), "wb").write(v)
    open("%s/bad-%s.bin" % (d, k), "wb").write(open(d + "/u16.bin", "rb").read())
open(d + "/nobin.idx", "wb").write(idx)
EOF
run() { "$MERAK" run --gbs 8 --steps 3 --json "$@" 2>"$tmpdir/err"; }
run --data-path "$tmpdir/u16" >"$tmpdir/a.json"
run --data "$tmpdir/raw.u16" >"$tmpdir/b.json"
run --data-path "$tmpdir/i32.idx" >"$tmpdir/c.json"
losses() { "$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["losses"])' "$1"; }
check "a Megatron dataset trains on the same tokens as its raw stream ($(losses "$tmpdir/a.json"))" \
  test "$(losses "$tmpdir/a.json")" = "$(losses "$tmpdir/b.json")"
check "int32 ids and a multimodal index's modes: the same" test "$(losses "$tmpdir/c.json")" = "$(losses "$tmpdir/a.json")"
# Megatron's blend, --data-path W1 P1 W2 P2 ... (its order: tests/test_readers.c): one dataset of weight 1 is that
# dataset; 0.3 of it and 0.7 of another trains on both (other losses than either alone); flags may follow
run --data-path 1 "$tmpdir/u16" >"$tmpdir/d.json"
check "--data-path 1 PREFIX is PREFIX" test "$(losses "$tmpdir/d.json")" = "$(losses "$tmpdir/a.json")"
run --data-path 0.3 "$tmpdir/u16" 0.7 "$tmpdir/big" --model llama-tiny --vocab-size 128256 >"$tmpdir/e.json"
run --data-path "$tmpdir/big" --model llama-tiny --vocab-size 128256 >"$tmpdir/f.json"
check "a blend of two datasets trains, on other batches than the second alone" "$PYTHON" -c '
import json, sys
e, f = (json.load(open(p)) for p in sys.argv[1:3])
assert len(e["losses"]) == 3 and e["losses"] != f["losses"], (e["losses"], f["losses"])' "$tmpdir/e.json" "$tmpdir/f.json"
expect_fail "a blend with an odd count" "nor a blend of at most 256 'WEIGHT PATH' pairs" -- \
  "$MERAK" run --data-path 0.3 "$tmpdir/u16" 0.7 --steps 1
expect_fail "a blend's bad weight" "weight '-2' is not a number" -- "$MERAK" run --data-path 0.3 "$tmpdir/u16" -2 "$tmpdir/i32" --steps 1
expect_ok "int32 ids above 65535 for a 128,256 vocabulary" "$MERAK" run --model llama-tiny --vocab-size 128256 \
  --data-path "$tmpdir/big" --gbs 2 --steps 1
expect_fail "an id above the vocabulary" "token id 128255 at position 0 is not below the vocabulary size 256" -- \
  "$MERAK" run --data-path "$tmpdir/big" --gbs 2 --steps 1
expect_fail "bad magic" "not a Megatron-LM index .no MMIDIDX header." -- "$MERAK" run --data-path "$tmpdir/bad-magic" --steps 1
expect_fail "version 2" "index version 2 .want 1." -- "$MERAK" run --data-path "$tmpdir/bad-version" --steps 1
expect_fail "float tokens" "dtype code 7 is not an integer token type" -- "$MERAK" run --data-path "$tmpdir/bad-float" --steps 1
expect_fail "a short index" "bytes, the header's 40 sequences and 41 documents need" -- "$MERAK" run --data-path "$tmpdir/bad-short" --steps 1
expect_fail "a pointer past the .bin" "sequence 0 .* lies outside the" -- "$MERAK" run --data-path "$tmpdir/bad-pointer" --steps 1
expect_fail "documents out of order" "document index 39 is 41" -- "$MERAK" run --data-path "$tmpdir/bad-documents" --steps 1
expect_fail "no .bin" "no regular file beside" -- "$MERAK" run --data-path "$tmpdir/nobin" --steps 1
finish
