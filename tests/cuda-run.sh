#!/bin/sh
# merak run --backend cuda: without a visible GPU (or without CUDA built in)
# one clear line and exit 2; with a GPU (nvidia-smi lists one) a short run
# must succeed and give the CPU backend's losses (1e-4 relative: fp32, GEMM
# reduction order; MK_CUDA_MATH unset).
. "$top_srcdir/tests/lib.sh"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  unset MK_CUDA_MATH
  expect_ok "cuda run" "$MERAK" run --backend cuda --steps 3 --json
  cp "$tmpdir/out" "$tmpdir/cuda.json"
  expect_ok "cpu run" "$MERAK" run --backend cpu --steps 3 --json
  a=$(sed -n 's/.*"losses":\[\([^]]*\)\].*/\1/p' "$tmpdir/cuda.json")
  b=$(sed -n 's/.*"losses":\[\([^]]*\)\].*/\1/p' "$tmpdir/out")
  check "cuda losses [$a] match cpu [$b]" sh -c "echo '$a|$b' | awk -F'|' '{
    n = split(\$1, x, \",\"); m = split(\$2, y, \",\"); if (n != m || n == 0) exit 1
    for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (d > 1e-4 * y[i]) exit 1 }
    exit 0 }'"
else
  expect_fail "--backend cuda without a GPU" "no CUDA device is visible|built without CUDA" -- \
    "$MERAK" run --backend cuda --steps 1
  expect_fail "--backend cuda without a GPU, with --json" "no CUDA device is visible|built without CUDA" -- \
    "$MERAK" run --backend cuda --steps 1 --json
fi
finish
