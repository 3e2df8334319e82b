#!/bin/sh
# A file from our safetensors writer, read by a standard-library Python reader.
. "$top_srcdir/tests/lib.sh"
"$top_builddir/tests/test_io" --write "$tmpdir/x.safetensors" || { echo "write failed"; exit 1; }
expect_ok "python reads names, shapes and metadata" "${PYTHON:-python3}" "$top_srcdir/tests/st_read.py" \
  "$tmpdir/x.safetensors" --check=transformer.wte.weight=3x4 --check=transformer.ln_f.bias=4
cat "$tmpdir/out"
check "metadata step" grep -q '"step": "7"' "$tmpdir/out"
finish
