#!/bin/sh
# merak run --backend cuda: without a visible GPU (or without CUDA built in)
# one clear line and exit 2; with a GPU (nvidia-smi lists one) a short run
# must succeed and give the CPU backend's losses (1e-4 relative: fp32, GEMM
# reduction order; MK_CUDA_MATH unset), and in bf16 and fp16 (--bf16,
# --fp16: 16-bit GEMM operands and saved activations over fp32 weights,
# rounded by the CPU's rule) the losses of the CPU backend run the same way
# (MK_TEST_STAGED=1: src/cpu/backend_cpu.c) within 2e-3 relative (the sums'
# order moves a rounding now and then; the 16-bit losses are not fp32's),
# and a bf16 pipeline of two ranks (its sends 16-bit, staged through the
# host) one rank's within 1e-5.
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
  PY=${PYTHON:-python3}
  cat >"$tmpdir/near.py" <<'EOS'
import json, sys
a, b, tol = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), float(sys.argv[3])
x, y = a["losses"], b["losses"]
print("  ", x, "\n  ", y)
assert len(x) == len(y) > 0 and all(abs(p - q) <= tol * abs(q) for p, q in zip(x, y))
for k in sys.argv[4:]:  # key=value fields of the first file
    f, v = k.split("=")
    assert str(a.get(f)) == v, (f, a.get(f), v)
EOS
  f16="--seq-length 256 --gbs 4 --steps 10 --json"
  "$MERAK" run --backend cuda $f16 >"$tmpdir/f32.json" 2>"$tmpdir/err" || cat "$tmpdir/err"
  for dt in bf16 fp16; do
    expect_ok "cuda $dt run" "$MERAK" run --backend cuda --$dt $f16
    cp "$tmpdir/out" "$tmpdir/c$dt.json"
    expect_ok "cpu $dt run" env MK_TEST_NO_DNNL=1 MK_TEST_STAGED=1 "$MERAK" run --backend cpu --$dt $f16
    check "cuda $dt losses within 2e-3 of the cpu's" "$PY" "$tmpdir/near.py" "$tmpdir/c$dt.json" "$tmpdir/out" 2e-3 \
      dtype=$dt
    check "cuda $dt losses are not fp32's" sh -c "! \"$PY\" \"$tmpdir/near.py\" \"$tmpdir/c$dt.json\" \"$tmpdir/f32.json\" 0 2>/dev/null"
  done
  expect_ok "cuda bf16 pp 2" "$MPIEXEC" $MPIEXEC_FLAGS -n 2 "$MERAK" run --backend cuda --bf16 --pp 2 $f16
  check "cuda bf16 pp 2 = one rank within 1e-5" "$PY" "$tmpdir/near.py" "$tmpdir/out" "$tmpdir/cbf16.json" 1e-5
else
  expect_fail "--backend cuda without a GPU" "no CUDA device is visible|built without CUDA" -- \
    "$MERAK" run --backend cuda --steps 1
  expect_fail "--backend cuda without a GPU, with --json" "no CUDA device is visible|built without CUDA" -- \
    "$MERAK" run --backend cuda --steps 1 --json
fi
finish
